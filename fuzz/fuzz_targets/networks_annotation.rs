//! A Pod's `k8s.v1.cni.cncf.io/networks` (extra networks) and the `openstack.org/kuryr-config` of the
//! NetworkAttachmentDefinitions it names, through `kuryr_core::attachments` into the KuryrPort's
//! `spec.additionalNetworks`.
//!
//! Asserts: no panic; every interface given is a Linux name (1-15 bytes, no '/', not `eth0`) and unique
//! within the pod; every subnet given is one of the allowed ones, attached once; each request is either
//! given an interface, folded into an earlier one on the same subnet, or reported as a problem.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::Arbitrary;
use kuryr_api::attachment::KURYR_CONFIG;
use kuryr_core::attachments::{parse, resolve};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    annotation: String,
    /// Definitions: (namespace, name, kuryr-config value or none).
    definitions: Vec<(String, String, Option<String>)>,
    allowed: Vec<String>,
}

fuzz_target!(|input: Input| {
    let Ok(requests) = parse(&input.annotation) else {
        return;
    };
    let found: BTreeMap<(String, String), Option<BTreeMap<String, String>>> = input
        .definitions
        .iter()
        .map(|(ns, name, config)| {
            let ann = config
                .as_ref()
                .map(|c| BTreeMap::from([(KURYR_CONFIG.to_owned(), c.clone())]));
            ((ns.clone(), name.clone()), ann)
        })
        .collect();
    let allowed: BTreeSet<String> = input.allowed.iter().cloned().collect();
    let (nets, problems) = resolve(&requests, "pod-ns", &found, &allowed);
    let mut names = BTreeSet::new();
    let mut subnets = BTreeSet::new();
    for n in &nets {
        assert!(
            !n.interface.is_empty() && n.interface.len() <= 15 && !n.interface.contains('/'),
            "interface {:?}",
            n.interface
        );
        assert_ne!(n.interface, "eth0");
        assert!(
            names.insert(n.interface.clone()),
            "interface {} twice",
            n.interface
        );
        assert!(
            allowed.contains(&n.subnet_id),
            "subnet {} not allowed",
            n.subnet_id
        );
        assert!(
            subnets.insert(n.subnet_id.clone()),
            "subnet {} twice",
            n.subnet_id
        );
    }
    assert!(nets.len() + problems.len() <= requests.len());
});
