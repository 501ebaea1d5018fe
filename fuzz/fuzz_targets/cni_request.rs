//! The plugin's input: `CNI_*` environment plus the network configuration on stdin.
//!
//! Asserts: no panic; every failure is a spec error code (1, 2, 4, 6 or 7) and the error JSON names a
//! supported version; an accepted request satisfies the spec's rules (container id and ifname syntax,
//! netns and pod for ADD/CHECK, CHECK/STATUS/GC only where the version has them) and survives the trip
//! to the daemon (JSON encode/decode) unchanged; `CNI_ARGS` parsing round-trips.

#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use kuryr_cni::cni::{codes, parse_cni_args, CniRequest, CniVersion, Command, NetConf, SUPPORTED_VERSIONS};
use kuryr_cni::protocol::decode_request;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
enum Cmd {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Args {
    Raw(String),
    Pairs(Vec<(String, String)>),
    Pod {
        namespace: String,
        name: String,
        uid: Option<String>,
        extra: Vec<(String, String)>,
    },
}

#[derive(Arbitrary, Debug)]
enum Stdin {
    Raw(Vec<u8>),
    Conf {
        version: Version,
        name: Option<String>,
        plugin_type: Option<String>,
        socket_path: Option<String>,
        timeout: Option<Timeout>,
        ipam: bool,
        prev_result: Option<String>,
        valid_attachments: Option<Vec<(String, String)>>,
    },
}

#[derive(Arbitrary, Debug)]
enum Version {
    Known(u8),
    Raw(String),
    Number(f64),
}

#[derive(Arbitrary, Debug)]
enum Timeout {
    Secs(u64),
    Negative(i64),
    Text(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    command: Cmd,
    container_id: Option<String>,
    netns: Option<String>,
    ifname: Option<String>,
    args: Option<Args>,
    stdin: Stdin,
}

fn render_args(a: &Args) -> String {
    match a {
        Args::Raw(s) => s.clone(),
        Args::Pairs(p) => p
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";"),
        Args::Pod {
            namespace,
            name,
            uid,
            extra,
        } => {
            let mut p = vec![
                "IgnoreUnknown=1".to_owned(),
                format!("K8S_POD_NAMESPACE={namespace}"),
                format!("K8S_POD_NAME={name}"),
            ];
            if let Some(u) = uid {
                p.push(format!("K8S_POD_UID={u}"));
            }
            p.extend(extra.iter().map(|(k, v)| format!("{k}={v}")));
            p.join(";")
        }
    }
}

fn render_stdin(s: &Stdin) -> Vec<u8> {
    match s {
        Stdin::Raw(b) => b.clone(),
        Stdin::Conf {
            version,
            name,
            plugin_type,
            socket_path,
            timeout,
            ipam,
            prev_result,
            valid_attachments,
        } => {
            let mut o = serde_json::Map::new();
            o.insert(
                "cniVersion".into(),
                match version {
                    Version::Known(i) => {
                        json!(SUPPORTED_VERSIONS[usize::from(*i) % SUPPORTED_VERSIONS.len()])
                    }
                    Version::Raw(s) => json!(s),
                    Version::Number(n) => json!(n),
                },
            );
            if let Some(n) = name {
                o.insert("name".into(), json!(n));
            }
            if let Some(t) = plugin_type {
                o.insert("type".into(), json!(t));
            }
            if let Some(p) = socket_path {
                o.insert("socketPath".into(), json!(p));
            }
            if let Some(t) = timeout {
                let v = match t {
                    Timeout::Secs(n) => json!(n),
                    Timeout::Negative(n) => json!(n),
                    Timeout::Text(s) => json!(s),
                };
                o.insert("timeoutSeconds".into(), v);
            }
            if *ipam {
                o.insert("ipam".into(), json!({"type": "host-local"}));
            }
            if let Some(p) = prev_result {
                let v = serde_json::from_str::<Value>(p).unwrap_or_else(|_| json!(p));
                o.insert("prevResult".into(), v);
            }
            if let Some(va) = valid_attachments {
                let list: Vec<Value> = va
                    .iter()
                    .map(|(c, i)| json!({"containerID": c, "ifname": i}))
                    .collect();
                o.insert("cni.dev/valid-attachments".into(), json!(list));
            }
            serde_json::to_vec(&Value::Object(o)).unwrap()
        }
    }
}

/// The spec's container id rule, written independently of the plugin's.
fn valid_container_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(c))
}

fn valid_ifname(n: &str) -> bool {
    (1..=15).contains(&n.len())
        && n != "."
        && n != ".."
        && !n.contains('/')
        && !n.contains(':')
        && !n.chars().any(char::is_whitespace)
}

fn check_args(raw: &str) {
    match parse_cni_args(raw) {
        Ok(map) => {
            for (k, v) in &map {
                assert!(!k.is_empty(), "empty key from {raw:?}");
                assert!(
                    !k.contains(';') && !v.contains(';'),
                    "separator kept in {k:?}={v:?}"
                );
                assert!(!k.contains('='), "'=' in key {k:?}");
            }
            // Rendering the map back and parsing it again gives the same map.
            let again: String = map.iter().map(|(k, v)| format!("{k}={v};")).collect();
            let back = parse_cni_args(&again).expect("re-rendered CNI_ARGS must parse");
            assert_eq!(back, map, "CNI_ARGS round trip of {raw:?}");
        }
        Err(e) => assert_eq!(e.code, codes::INVALID_ENV, "{raw:?}: {e}"),
    }
}

fuzz_target!(|input: Input| {
    let command = match &input.command {
        Cmd::Add => "ADD".to_owned(),
        Cmd::Del => "DEL".to_owned(),
        Cmd::Check => "CHECK".to_owned(),
        Cmd::Status => "STATUS".to_owned(),
        Cmd::Gc => "GC".to_owned(),
        Cmd::Version => "VERSION".to_owned(),
        Cmd::Raw(s) => s.clone(),
    };
    let args = input.args.as_ref().map(render_args);
    let stdin = render_stdin(&input.stdin);
    let mut env: BTreeMap<&str, String> = BTreeMap::new();
    env.insert("CNI_COMMAND", command.clone());
    for (k, v) in [
        ("CNI_CONTAINERID", &input.container_id),
        ("CNI_NETNS", &input.netns),
        ("CNI_IFNAME", &input.ifname),
        ("CNI_ARGS", &args),
    ] {
        if let Some(v) = v {
            env.insert(k, v.clone());
        }
    }
    let lookup = |k: &str| env.get(k).cloned();

    if let Some(a) = &args {
        check_args(a);
    }
    // The error path: the version an error names is always one the runtime understands.
    let ev = CniRequest::error_version(&stdin);
    assert!(SUPPORTED_VERSIONS.contains(&ev.as_str()), "error version {ev}");
    let reply = CniRequest::version_reply(&stdin);
    assert_eq!(reply["cniVersion"], json!(ev));

    match NetConf::parse(&stdin) {
        Ok(c) => {
            assert!(!c.cni_version.is_empty() && !c.name.is_empty() && !c.plugin_type.is_empty());
        }
        Err(e) => assert!(
            [
                codes::UNSUPPORTED_FIELD,
                codes::DECODING_FAILURE,
                codes::INVALID_NETCONF
            ]
            .contains(&e.code),
            "netconf error code {e}"
        ),
    }

    let req = match CniRequest::parse(lookup, &stdin) {
        Ok(r) => r,
        Err(e) => {
            assert!(
                [
                    codes::INCOMPATIBLE_VERSION,
                    codes::UNSUPPORTED_FIELD,
                    codes::INVALID_ENV,
                    codes::DECODING_FAILURE,
                    codes::INVALID_NETCONF
                ]
                .contains(&e.code),
                "unexpected error code: {e}"
            );
            let j = e.to_json(&ev);
            assert_eq!(j["code"], json!(e.code));
            return;
        }
    };

    // An accepted request obeys the spec.
    assert_eq!(req.command.as_str(), command);
    assert_ne!(req.command, Command::Version);
    assert_eq!(CniVersion::parse(&req.config.cni_version).unwrap(), req.version);
    if req.command == Command::Check {
        assert!(req.version.has_check());
    }
    if matches!(req.command, Command::Status | Command::Gc) {
        assert!(req.version.has_status_gc());
    }
    assert_eq!(
        req.args,
        args.as_deref()
            .map(|a| parse_cni_args(a).unwrap())
            .unwrap_or_default()
    );
    if req.command.is_attachment() {
        assert!(valid_container_id(&req.container_id), "{:?}", req.container_id);
        assert!(valid_ifname(&req.ifname), "{:?}", req.ifname);
        assert_eq!(Some(&req.container_id), input.container_id.as_ref());
        assert_eq!(Some(&req.ifname), input.ifname.as_ref());
        if req.command != Command::Del {
            assert!(!req.netns.is_empty());
            let pod = req.pod.as_ref().expect("ADD/CHECK carry the pod");
            assert!(!pod.namespace.is_empty() && !pod.name.is_empty());
            assert_eq!(Some(&pod.namespace), req.args.get("K8S_POD_NAMESPACE"));
            assert_eq!(Some(&pod.name), req.args.get("K8S_POD_NAME"));
        }
    } else {
        assert!(req.container_id.is_empty() && req.ifname.is_empty() && req.pod.is_none());
    }

    // What the plugin sends is what the daemon decodes.
    let mut line = serde_json::to_string(&req).unwrap();
    line.push('\n');
    let back = decode_request(&line).expect("the daemon decodes what the plugin encodes");
    assert_eq!(back, req);
});
