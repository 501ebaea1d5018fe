use proptest::prelude::*;

use super::*;

fn pair(ip: &str, mac: Option<&str>) -> AddressPair {
    AddressPair {
        ip_address: ip.into(),
        mac_address: mac.map(Into::into),
    }
}

fn mk_vm_port(id: &str, pairs: Vec<AddressPair>) -> NeutronPort {
    NeutronPort {
        id: id.into(),
        network_id: "node-net".into(),
        allowed_address_pairs: pairs,
        revision_number: 7,
        ..NeutronPort::default()
    }
}

#[test]
fn vrrp_macs_are_formatted_and_parsed_in_any_case() {
    assert_eq!(vrrp_mac(1), "00:00:5e:00:01:01");
    assert_eq!(vrrp_mac(255), "00:00:5e:00:01:ff");
    assert_eq!(parse_vrrp_mac("00:00:5E:00:01:0A"), Some(10));
    assert_eq!(parse_vrrp_mac("00:00:5e:00:01:00"), None);
    assert_eq!(parse_vrrp_mac("00:00:5e:00:02:01"), None);
    assert_eq!(parse_vrrp_mac("fa:16:3e:00:00:01"), None);
}

#[test]
fn the_book_is_rebuilt_from_every_vm_port_on_the_network() {
    let ports = vec![
        mk_vm_port(
            "vm1",
            vec![
                pair("10.0.0.5", Some("00:00:5e:00:01:01")),
                pair("10.0.0.9", None),
            ],
        ),
        mk_vm_port("vm2", vec![pair("10.0.0.6", Some("00:00:5e:00:01:03"))]),
        NeutronPort {
            network_id: "elsewhere".into(),
            ..mk_vm_port("vm3", vec![pair("10.1.0.6", Some("00:00:5e:00:01:02"))])
        },
    ];
    let mut macs = VrrpMacs::from_ports("node-net", &ports);
    assert_eq!(macs.in_use(), 2);
    assert_eq!(macs.mac_of("10.0.0.6").as_deref(), Some("00:00:5e:00:01:03"));
    // 02 is used on another network only: free here.
    assert_eq!(macs.allocate("10.0.0.7").unwrap(), "00:00:5e:00:01:02");
}

#[test]
fn an_ip_keeps_its_mac_when_asked_again() {
    let mut macs = VrrpMacs::from_ports("n", &[]);
    let mac = macs.allocate("10.0.0.5").unwrap();
    assert_eq!(macs.allocate("10.0.0.5").unwrap(), mac);
    assert_eq!(macs.in_use(), 1);
}

#[test]
fn the_256th_pod_on_a_network_gets_a_clear_error() {
    let mut macs = VrrpMacs::from_ports("node-net", &[]);
    for i in 0..255 {
        macs.allocate(&format!("10.0.{}.{}", i / 200, i % 200)).unwrap();
    }
    let err = macs.allocate("10.9.9.9").unwrap_err();
    assert_eq!(
        err,
        CoreError::VrrpMacsExhausted {
            network_id: "node-net".into()
        }
    );
    macs.release("10.0.0.3");
    assert_eq!(macs.allocate("10.9.9.9").unwrap(), "00:00:5e:00:01:04");
}

#[test]
fn adding_a_pair_keeps_the_other_pairs_and_pins_the_revision() {
    let vm = mk_vm_port("vm1", vec![pair("10.0.0.5", Some("00:00:5e:00:01:01"))]);
    let up = add_pair(&vm, "10.0.0.6", "00:00:5e:00:01:02").unwrap();
    assert_eq!(up.if_match_revision, 7);
    assert_eq!(
        up.pairs,
        vec![
            pair("10.0.0.5", Some("00:00:5e:00:01:01")),
            pair("10.0.0.6", Some("00:00:5e:00:01:02"))
        ]
    );
}

#[test]
fn an_existing_pair_needs_no_update_and_a_stale_one_is_replaced() {
    let vm = mk_vm_port("vm1", vec![pair("10.0.0.5", Some("00:00:5e:00:01:01"))]);
    assert_eq!(add_pair(&vm, "10.0.0.5", "00:00:5e:00:01:01"), None);
    let up = add_pair(&vm, "10.0.0.5", "00:00:5e:00:01:09").unwrap();
    assert_eq!(up.pairs, vec![pair("10.0.0.5", Some("00:00:5e:00:01:09"))]);
}

#[test]
fn removing_a_pair_leaves_the_others() {
    let vm = mk_vm_port(
        "vm1",
        vec![
            pair("10.0.0.5", Some("00:00:5e:00:01:01")),
            pair("10.0.0.6", None),
        ],
    );
    assert_eq!(
        remove_pair(&vm, "10.0.0.5").unwrap().pairs,
        vec![pair("10.0.0.6", None)]
    );
    assert_eq!(remove_pair(&vm, "10.0.0.7"), None);
}

proptest! {
    #[test]
    fn no_vrrp_mac_is_ever_given_to_two_ips(ops in proptest::collection::vec((any::<bool>(), 0u16..300), 0..400)) {
        let mut macs = VrrpMacs::from_ports("n", &[]);
        let mut held: std::collections::BTreeMap<String, String> = Default::default();
        for (alloc, i) in ops {
            let ip = format!("10.0.{}.{}", i / 250, i % 250);
            if alloc {
                match macs.allocate(&ip) {
                    Ok(mac) => {
                        prop_assert!(parse_vrrp_mac(&mac).is_some());
                        if let Some(prev) = held.get(&ip) {
                            prop_assert_eq!(prev, &mac);
                        }
                        prop_assert!(held.iter().all(|(other, m)| other == &ip || m != &mac));
                        held.insert(ip, mac);
                    }
                    Err(_) => prop_assert_eq!(held.len(), 255),
                }
            } else {
                prop_assert_eq!(macs.release(&ip), held.remove(&ip));
            }
            prop_assert_eq!(macs.in_use(), held.len());
        }
    }
}

proptest! {
    #[test]
    fn every_router_id_round_trips_through_its_mac(n in 1u8..=255) {
        prop_assert_eq!(parse_vrrp_mac(&vrrp_mac(n)), Some(n));
        prop_assert_eq!(parse_vrrp_mac(&vrrp_mac(n).to_uppercase()), Some(n));
    }
}

#[test]
fn stale_pairs_are_the_vrrp_ones_whose_ip_no_port_holds() {
    let vm = mk_vm_port(
        "vm1",
        vec![
            pair("10.0.0.5", Some("00:00:5e:00:01:01")),
            pair("10.0.0.6", Some("00:00:5e:00:01:02")),
            // Not ours: no MAC, or the VM's own MAC (e.g. a keepalived VIP on the VM itself).
            pair("10.0.0.7", None),
            pair("10.0.0.8", Some("fa:16:3e:00:00:08")),
        ],
    );
    assert_eq!(
        vrrp_paired_ips(&vm),
        BTreeSet::from(["10.0.0.5".to_owned(), "10.0.0.6".to_owned()])
    );
    let held = BTreeSet::from(["10.0.0.5".to_owned()]);
    let (up, dropped) = drop_stale_pairs(&vm, &held).expect("10.0.0.6 has no port");
    assert_eq!(dropped, vec!["10.0.0.6".to_owned()]);
    assert_eq!(up.if_match_revision, 7);
    assert_eq!(
        up.pairs,
        vec![
            pair("10.0.0.5", Some("00:00:5e:00:01:01")),
            pair("10.0.0.7", None),
            pair("10.0.0.8", Some("fa:16:3e:00:00:08")),
        ]
    );
    let all = BTreeSet::from(["10.0.0.5".to_owned(), "10.0.0.6".to_owned()]);
    assert_eq!(drop_stale_pairs(&vm, &all), None);
}
