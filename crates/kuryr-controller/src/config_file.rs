//! Settings from files, below the command line: `--config` (YAML, keys are the long flag names, `_` or `-`)
//! and `--kuryr-conf` (an upstream kuryr-kubernetes INI file, read through [`UPSTREAM_OPTIONS`]).
//! Precedence, lowest first: built-in defaults, kuryr.conf, the YAML file, `KURYR_*` environment, flags.
//! Files are turned into flags put before the real ones (clap takes the last occurrence), skipping any whose
//! environment variable is set. A file holding credentials is refused when others can read it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use kuryr_openstack::secret_files::{read_guarded, SecretFileError};

/// What an upstream `kuryr.conf` option becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// Honoured, under this flag name.
    Flag(&'static str),
    /// Read but has no effect here; the reason is logged.
    Dropped(&'static str),
}

/// `(section, option)` -> what it becomes. docs/operations.md carries this table for operators.
pub const UPSTREAM_OPTIONS: &[(&str, &str, Upstream)] = &[
    ("kubernetes", "pod_vif_driver", Upstream::Flag("vif-driver")),
    ("kubernetes", "controller_ha", Upstream::Flag("leader-elect")),
    (
        "kubernetes",
        "controller_ha_elector_port",
        Upstream::Dropped("leader election is built in (Lease), no sidecar"),
    ),
    (
        "kubernetes",
        "api_root",
        Upstream::Dropped("use --kubeconfig or the in-cluster config"),
    ),
    (
        "kubernetes",
        "ssl_ca_crt_file",
        Upstream::Dropped("use --kubeconfig or the in-cluster config"),
    ),
    (
        "kubernetes",
        "token_file",
        Upstream::Dropped("use --kubeconfig or the in-cluster config"),
    ),
    (
        "kubernetes",
        "enabled_handlers",
        Upstream::Dropped("every handler this build has is always on"),
    ),
    (
        "kubernetes",
        "port_debug",
        Upstream::Dropped("ports are always named after their pod"),
    ),
    (
        "kubernetes",
        "pod_subnets_driver",
        Upstream::Dropped("the subnet driver follows the namespace-networks setting"),
    ),
    (
        "kubernetes",
        "pod_security_groups_driver",
        Upstream::Dropped("policy SGs are applied when NetworkPolicies exist"),
    ),
    (
        "kubernetes",
        "vif_pool_driver",
        Upstream::Dropped("pools are sized by ports_pool_*"),
    ),
    (
        "kubernetes",
        "use_events",
        Upstream::Dropped("Events are always published"),
    ),
    ("neutron_defaults", "project", Upstream::Flag("project-id")),
    ("neutron_defaults", "pod_subnet", Upstream::Flag("pod-subnet")),
    (
        "neutron_defaults",
        "pod_security_groups",
        Upstream::Flag("pod-security-groups"),
    ),
    (
        "neutron_defaults",
        "resource_tags",
        Upstream::Dropped("ownership tags (kuryr.cluster/kind/uid) replace them; set --cluster-id"),
    ),
    (
        "neutron_defaults",
        "ovs_bridge",
        Upstream::Dropped("no OVS binding on nested drivers"),
    ),
    (
        "neutron_defaults",
        "network_device_mtu",
        Upstream::Dropped("the MTU comes from the Neutron network"),
    ),
    ("pod_vif_nested", "link_iface", Upstream::Flag("link-iface")),
    (
        "pod_vif_nested",
        "worker_nodes_subnets",
        Upstream::Dropped("parent ports are found by the Node's InternalIP"),
    ),
    ("binding", "link_iface", Upstream::Flag("link-iface")),
    ("vif_pool", "ports_pool_min", Upstream::Flag("ports-pool-min")),
    ("vif_pool", "ports_pool_max", Upstream::Flag("ports-pool-max")),
    ("vif_pool", "ports_pool_batch", Upstream::Flag("ports-pool-batch")),
    (
        "vif_pool",
        "ports_pool_update_frequency",
        Upstream::Dropped("pools refill on demand"),
    ),
    (
        "vif_pool",
        "vif_pool_mapping",
        Upstream::Dropped(
            "a Node's driver is its pod_vif (or kuryr.openstack.org/pod-vif) label; pools follow it",
        ),
    ),
    (
        "vif_pool",
        "pools_vif_drivers",
        Upstream::Dropped(
            "a Node's driver is its pod_vif (or kuryr.openstack.org/pod-vif) label; pools follow it",
        ),
    ),
    (
        "neutron",
        "auth_url",
        Upstream::Dropped("use clouds.yaml (--os-cloud / --clouds-yaml) or OS_* variables"),
    ),
    (
        "neutron",
        "auth_type",
        Upstream::Dropped("use clouds.yaml (--os-cloud / --clouds-yaml) or OS_* variables"),
    ),
    (
        "neutron",
        "username",
        Upstream::Dropped("use clouds.yaml (--os-cloud / --clouds-yaml) or OS_* variables"),
    ),
    (
        "neutron",
        "password",
        Upstream::Dropped("use clouds.yaml (--os-cloud / --clouds-yaml) or OS_* variables"),
    ),
    (
        "neutron",
        "project_name",
        Upstream::Dropped("use clouds.yaml (--os-cloud / --clouds-yaml) or OS_* variables"),
    ),
    (
        "neutron",
        "user_domain_name",
        Upstream::Dropped("use clouds.yaml (--os-cloud / --clouds-yaml) or OS_* variables"),
    ),
    (
        "neutron",
        "project_domain_name",
        Upstream::Dropped("use clouds.yaml (--os-cloud / --clouds-yaml) or OS_* variables"),
    ),
    (
        "health_server",
        "port",
        Upstream::Dropped("use --metrics-addr (serves /livez, /readyz, /metrics)"),
    ),
    (
        "prometheus_exporter",
        "controller_exporter_port",
        Upstream::Dropped("use --metrics-addr"),
    ),
];

/// Upstream `pod_vif_driver` values to ours.
fn upstream_value(flag: &str, value: &str) -> String {
    match (flag, value) {
        ("vif-driver", "neutron-vif" | "neutron") => "neutron-vif".into(),
        ("vif-driver", "nested-vlan") => "nested-vlan".into(),
        ("vif-driver", "nested-macvlan") => "nested-macvlan".into(),
        ("leader-elect", v) => v.to_ascii_lowercase(),
        _ => value.to_owned(),
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigFileError {
    #[error("{file}: {reason}")]
    Read { file: String, reason: String },
    #[error("{file}: option `{key}`: {reason}")]
    Option {
        file: String,
        key: String,
        reason: String,
    },
    /// Unreadable, or holding credentials others can read.
    #[error(transparent)]
    Secret(#[from] SecretFileError),
}

/// The long options clap knows, with their environment variable.
pub struct Known {
    pub flags: BTreeMap<String, Option<String>>,
}

impl Known {
    pub fn of(cmd: &clap::Command) -> Self {
        let flags = cmd
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?.to_owned();
                let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
                Some((long, env))
            })
            .collect();
        Self { flags }
    }
}

fn scalar(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `(flag, value)` pairs from a YAML config file's text; unknown keys and nested values are refused.
pub fn yaml_pairs(file: &str, text: &str, known: &Known) -> Result<Vec<(String, String)>, ConfigFileError> {
    let doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| ConfigFileError::Read {
        file: file.to_owned(),
        reason: format!("not YAML: {e}"),
    })?;
    let map = match doc {
        serde_yaml::Value::Mapping(m) => m,
        serde_yaml::Value::Null => return Ok(Vec::new()),
        _ => {
            return Err(ConfigFileError::Read {
                file: file.to_owned(),
                reason: "expected a mapping of option: value".into(),
            })
        }
    };
    let mut out = Vec::new();
    for (k, v) in map {
        let key = scalar(&k).unwrap_or_default();
        let flag = key.replace('_', "-");
        let opt_err = |reason: String| ConfigFileError::Option {
            file: file.to_owned(),
            key: key.clone(),
            reason,
        };
        if flag == "config" || flag == "kuryr-conf" {
            return Err(opt_err("files cannot include other files".into()));
        }
        if !known.flags.contains_key(&flag) {
            return Err(opt_err("unknown option (see `kuryr-controller --help`)".into()));
        }
        let value = match &v {
            serde_yaml::Value::Sequence(items) => items
                .iter()
                .map(|i| scalar(i).ok_or_else(|| opt_err("list items must be scalars".into())))
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            other => scalar(other).ok_or_else(|| opt_err("expected a scalar or a list of scalars".into()))?,
        };
        out.push((flag, value));
    }
    Ok(out)
}

/// `(flag, value)` pairs from an upstream kuryr.conf's text, and one warning per option read but dropped
/// or unknown.
pub fn ini_pairs(text: &str) -> (Vec<(String, String)>, Vec<String>) {
    let mut section = String::from("DEFAULT");
    let (mut out, mut warnings) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.trim().to_owned();
            continue;
        }
        let Some((k, v)) = line.split_once(['=', ':']) else {
            warnings.push(format!(
                "kuryr.conf: [{section}] `{line}`: not `option = value`, ignored"
            ));
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match UPSTREAM_OPTIONS.iter().find(|(s, o, _)| *s == section && *o == k) {
            Some((_, _, Upstream::Flag(flag))) => out.push(((*flag).to_owned(), upstream_value(flag, v))),
            Some((_, _, Upstream::Dropped(why))) => {
                warnings.push(format!("kuryr.conf: [{section}] {k} is not used: {why}"))
            }
            None => warnings.push(format!(
                "kuryr.conf: [{section}] {k} is unknown to kuryr-rs, ignored"
            )),
        }
    }
    (out, warnings)
}

/// The command line with the files' settings put in front. `env` says whether an environment variable is
/// set (those win over files).
pub fn expand(
    argv: Vec<OsString>,
    known: &Known,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(Vec<OsString>, Vec<String>), ConfigFileError> {
    let find = |flag: &str, var: &str| {
        let eq = format!("--{flag}=");
        let mut it = argv.iter().map(|a| a.to_string_lossy().into_owned());
        let mut found = None;
        while let Some(a) = it.next() {
            if a == format!("--{flag}") {
                found = it.next();
            } else if let Some(v) = a.strip_prefix(&eq) {
                found = Some(v.to_owned());
            }
        }
        found.or_else(|| env(var))
    };
    let mut pairs = Vec::new();
    let mut warnings = Vec::new();
    if let Some(path) = find("kuryr-conf", "KURYR_UPSTREAM_CONF") {
        let text = read_guarded(Path::new(&path))?;
        let (p, w) = ini_pairs(&text);
        pairs.extend(p);
        warnings.extend(w);
    }
    if let Some(path) = find("config", "KURYR_CONFIG") {
        let text = read_guarded(Path::new(&path))?;
        pairs.extend(yaml_pairs(&path, &text, known)?);
    }
    let mut out: Vec<OsString> = argv.iter().take(1).cloned().collect();
    for (flag, value) in pairs {
        let env_set = known
            .flags
            .get(&flag)
            .cloned()
            .flatten()
            .and_then(|v| env(&v))
            .is_some();
        if !env_set {
            out.push(format!("--{flag}={value}").into());
        }
    }
    out.extend(argv.into_iter().skip(1));
    Ok((out, warnings))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::Args;

    fn known() -> Known {
        Known::of(&Args::command())
    }

    #[test]
    fn yaml_keys_become_flags_and_unknown_or_nested_keys_are_refused() {
        let text = "cluster_id: c1\npod-subnet: s1\npod_security_groups: [a, b]\nvlan_first: 100\n";
        let pairs = yaml_pairs("k.yaml", text, &known()).unwrap();
        assert!(pairs.contains(&("pod-security-groups".into(), "a,b".into())));
        assert!(pairs.contains(&("vlan-first".into(), "100".into())));
        let e = yaml_pairs("k.yaml", "pod_subnett: x\n", &known()).unwrap_err();
        assert!(
            e.to_string().contains("option `pod_subnett`: unknown option"),
            "{e}"
        );
        let e = yaml_pairs("k.yaml", "pod_subnet: {a: 1}\n", &known()).unwrap_err();
        assert!(e.to_string().contains("option `pod_subnet`"), "{e}");
        assert!(yaml_pairs("k.yaml", "- a\n", &known()).is_err());
    }

    #[test]
    fn upstream_options_that_matter_are_mapped_and_the_rest_warned_about() {
        let text =
            "[DEFAULT]\ndebug = true\n[kubernetes]\npod_vif_driver = nested-vlan\ncontroller_ha = True\n\
                    [neutron_defaults]\npod_subnet = sub-1\nproject = p1\nresource_tags = a\n\
                    [vif_pool]\nports_pool_batch = 20\n";
        let (pairs, warnings) = ini_pairs(text);
        assert_eq!(
            pairs,
            vec![
                ("vif-driver".to_owned(), "nested-vlan".to_owned()),
                ("leader-elect".into(), "true".into()),
                ("pod-subnet".into(), "sub-1".into()),
                ("project-id".into(), "p1".into()),
                ("ports-pool-batch".into(), "20".into()),
            ]
        );
        assert!(warnings.iter().any(|w| w.contains("[DEFAULT] debug is unknown")));
        assert!(warnings.iter().any(|w| w.contains("resource_tags is not used")));
        // Every flag the table names exists.
        for (_, _, u) in UPSTREAM_OPTIONS {
            if let Upstream::Flag(f) = u {
                assert!(known().flags.contains_key(*f), "{f}");
            }
        }
    }

    #[test]
    fn files_sit_below_environment_and_flags() {
        let dir = std::env::temp_dir().join(format!("kuryr-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("c.yaml");
        std::fs::write(
            &cfg,
            "cluster_id: from-file\npod_subnet: file-subnet\nvlan_first: 7\n",
        )
        .unwrap();
        let ini = dir.join("kuryr.conf");
        std::fs::write(
            &ini,
            "[neutron_defaults]\npod_subnet = ini-subnet\nproject = ini-project\n",
        )
        .unwrap();
        let argv: Vec<OsString> = vec![
            "kuryr-controller".into(),
            format!("--config={}", cfg.display()).into(),
            format!("--kuryr-conf={}", ini.display()).into(),
            "--vlan-first=9".into(),
        ];
        // KURYR_PROJECT_ID "is set": the file's project must not reach the command line.
        let env = |k: &str| (k == "KURYR_PROJECT_ID").then(|| "from-env".to_owned());
        let (expanded, _) = expand(argv, &known(), env).unwrap();
        assert!(!expanded
            .iter()
            .any(|a| a.to_string_lossy().starts_with("--project-id")));
        let args = <Args as clap::Parser>::try_parse_from(expanded).unwrap();
        assert_eq!(args.cluster_id, "from-file");
        assert_eq!(args.pod_subnet, "file-subnet", "YAML over kuryr.conf");
        assert_eq!(args.vlan_first, 9, "flags over files");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_shipped_configmap_is_a_valid_controller_config() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/controller/configmap.yaml"
        );
        let cm: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let text = cm["data"]["kuryr.yaml"].as_str().unwrap();
        let pairs = yaml_pairs("kuryr.yaml", text, &known()).unwrap();
        let mut argv: Vec<OsString> = vec!["kuryr-controller".into()];
        argv.extend(pairs.iter().map(|(k, v)| OsString::from(format!("--{k}={v}"))));
        let args = <Args as clap::Parser>::try_parse_from(argv).unwrap();
        args.config().unwrap();
        assert!(args.leader_elect);
    }
}
