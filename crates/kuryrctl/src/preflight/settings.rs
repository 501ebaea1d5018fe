//! The settings an install will run with, as preflight checks them: `--vif-driver`, `--pod-subnet`,
//! `--service-subnet`, `--external-network` (and their `KURYR_*` variables, the controller's names) over the
//! controller's own settings file (`--config`), whose keys are the controller's long flag names, with `_`
//! or `-`, as the controller reads them (docs/operations.md#configuration).

use std::path::Path;

use clap::ValueEnum;
use kuryr_api::VifType;

use crate::cli::{PreflightArgs, VifDriverArg};

/// A setting's value and where it came from (shown beside what the cloud says about it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    pub id: String,
    /// `--pod-subnet`, or the settings file's path.
    pub from: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub vif_driver: VifType,
    pub pod_subnet: Option<Given>,
    pub service_subnet: Option<Given>,
    pub secondary_pod_subnet: Option<Given>,
    pub secondary_service_subnet: Option<Given>,
    pub external_network: Option<Given>,
    /// `--namespace-projects` (or the file's list).
    pub namespace_projects: Vec<String>,
    /// `--additional-subnets` (or the file's list).
    pub additional_subnets: Vec<Given>,
}

/// What the settings file says, before the flags are laid over it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSettings {
    pub vif_driver: Option<VifDriverArg>,
    pub pod_subnet: Option<String>,
    pub service_subnet: Option<String>,
    pub secondary_pod_subnet: Option<String>,
    pub secondary_service_subnet: Option<String>,
    pub external_network: Option<String>,
    pub namespace_projects: Option<Vec<String>>,
    pub additional_subnets: Option<Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: not YAML: {source}")]
    Yaml { path: String, source: serde_yaml::Error },
    #[error("{path}: not a mapping of option: value")]
    NotMapping { path: String },
    #[error("{path}: option `{key}`: {reason}")]
    Value {
        path: String,
        key: String,
        reason: String,
    },
}

/// Flags over the settings file (read when `--config` is given).
pub fn resolve(a: &PreflightArgs) -> Result<Settings, SettingsError> {
    let (file, path) = match &a.config {
        Some(p) => (read_file(p)?, p.display().to_string()),
        None => (FileSettings::default(), String::new()),
    };
    let pick = |flag: &Option<String>, name: &str, from_file: Option<String>| {
        flag.clone()
            .map(|id| Given {
                id,
                from: format!("--{name}"),
            })
            .or_else(|| {
                from_file.map(|id| Given {
                    id,
                    from: path.clone(),
                })
            })
    };
    Ok(Settings {
        vif_driver: a
            .vif_driver
            .or(file.vif_driver)
            .unwrap_or(VifDriverArg::NestedVlan)
            .into(),
        pod_subnet: pick(&a.pod_subnet, "pod-subnet", file.pod_subnet),
        service_subnet: pick(&a.service_subnet, "service-subnet", file.service_subnet),
        secondary_pod_subnet: pick(
            &a.secondary_pod_subnet,
            "secondary-pod-subnet",
            file.secondary_pod_subnet,
        ),
        secondary_service_subnet: pick(
            &a.secondary_service_subnet,
            "secondary-service-subnet",
            file.secondary_service_subnet,
        ),
        external_network: pick(&a.external_network, "external-network", file.external_network),
        namespace_projects: pick_list(
            &a.namespace_projects,
            "namespace-projects",
            file.namespace_projects,
            &path,
        )
        .into_iter()
        .map(|g| g.id)
        .collect(),
        additional_subnets: pick_list(
            &a.additional_subnets,
            "additional-subnets",
            file.additional_subnets,
            &path,
        ),
    })
}

/// A list option: the flag's ids when it names any, else the file's, each with where it came from.
fn pick_list(flag: &[String], name: &str, from_file: Option<Vec<String>>, path: &str) -> Vec<Given> {
    let flag = list(flag.iter().map(String::as_str));
    let (ids, from) = if flag.is_empty() {
        (from_file.unwrap_or_default(), path.to_owned())
    } else {
        (flag, format!("--{name}"))
    };
    ids.into_iter()
        .map(|id| Given {
            id,
            from: from.clone(),
        })
        .collect()
}

/// Trimmed, non-empty ids.
fn list<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    items
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn read_file(path: &Path) -> Result<FileSettings, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&path.display().to_string(), &text)
}

/// The settings preflight needs from the file's text; every other key is the controller's business.
pub fn parse(path: &str, text: &str) -> Result<FileSettings, SettingsError> {
    let doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|source| SettingsError::Yaml {
        path: path.to_owned(),
        source,
    })?;
    let map = match doc {
        serde_yaml::Value::Mapping(m) => m,
        // An empty file sets nothing.
        serde_yaml::Value::Null => return Ok(FileSettings::default()),
        _ => {
            return Err(SettingsError::NotMapping {
                path: path.to_owned(),
            })
        }
    };
    let mut out = FileSettings::default();
    for (k, v) in map {
        let Some(key) = k.as_str() else { continue };
        let name = key.replace('-', "_");
        if !matches!(
            name.as_str(),
            "vif_driver"
                | "pod_subnet"
                | "service_subnet"
                | "secondary_pod_subnet"
                | "secondary_service_subnet"
                | "external_network"
                | "namespace_projects"
                | "additional_subnets"
        ) {
            continue;
        }
        let bad = |reason: &str| SettingsError::Value {
            path: path.to_owned(),
            key: key.to_owned(),
            reason: reason.to_owned(),
        };
        if name == "namespace_projects" || name == "additional_subnets" {
            let ids = match v {
                serde_yaml::Value::Null => Vec::new(),
                serde_yaml::Value::String(s) => list(std::iter::once(s.as_str())),
                serde_yaml::Value::Sequence(items) => {
                    let ids: Option<Vec<String>> =
                        items.iter().map(|i| i.as_str().map(str::to_owned)).collect();
                    let ids = ids.ok_or_else(|| bad("expected a list of ids"))?;
                    list(ids.iter().map(String::as_str))
                }
                _ => return Err(bad("expected a list of ids")),
            };
            if name == "namespace_projects" {
                out.namespace_projects = Some(ids);
            } else {
                out.additional_subnets = Some(ids);
            }
            continue;
        }
        let value = match v {
            serde_yaml::Value::Null => continue,
            serde_yaml::Value::String(s) => s,
            // An unquoted id of digits reads as a number.
            serde_yaml::Value::Number(n) => n.to_string(),
            _ => return Err(bad("expected a single value")),
        };
        match name.as_str() {
            "vif_driver" => {
                out.vif_driver = Some(VifDriverArg::from_str(&value, false).map_err(|_| {
                    bad(&format!(
                        "{value:?}: not nested-vlan, nested-macvlan or neutron-vif"
                    ))
                })?)
            }
            "pod_subnet" => out.pod_subnet = Some(value),
            "service_subnet" => out.service_subnet = Some(value),
            "secondary_pod_subnet" => out.secondary_pod_subnet = Some(value),
            "secondary_service_subnet" => out.secondary_service_subnet = Some(value),
            "external_network" => out.external_network = Some(value),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn args(argv: &[&str]) -> PreflightArgs {
        let mut full = vec!["kuryrctl", "preflight"];
        full.extend_from_slice(argv);
        match Cli::try_parse_from(full).unwrap().command {
            Command::Preflight(a) => *a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_controllers_file_is_read_with_either_spelling() {
        let f = parse(
            "kuryr.yaml",
            "cluster_id: c1\npod_subnet: s-pod\nservice-subnet: s-svc\nexternal_network: 1234\n\
             vif_driver: nested-macvlan\nleader_elect: true\npod_security_groups: [a, b]\n\
             secondary_pod_subnet: s-pod6\nsecondary-service-subnet: s-svc6\n",
        )
        .unwrap();
        assert_eq!(
            f,
            FileSettings {
                vif_driver: Some(VifDriverArg::NestedMacvlan),
                pod_subnet: Some("s-pod".into()),
                service_subnet: Some("s-svc".into()),
                secondary_pod_subnet: Some("s-pod6".into()),
                secondary_service_subnet: Some("s-svc6".into()),
                external_network: Some("1234".into()),
                namespace_projects: None,
                additional_subnets: None,
            }
        );
        assert_eq!(parse("e.yaml", "").unwrap(), FileSettings::default());
        let f = parse("p.yaml", "namespace_projects: [p-a, ' p-b']\n").unwrap();
        assert_eq!(
            f.namespace_projects,
            Some(vec!["p-a".to_owned(), "p-b".to_owned()])
        );
        let f = parse("p.yaml", "namespace-projects: p-a,p-c\n").unwrap();
        assert_eq!(
            f.namespace_projects,
            Some(vec!["p-a".to_owned(), "p-c".to_owned()])
        );
        assert!(parse("p.yaml", "namespace_projects: [[a]]\n").is_err());
    }

    #[test]
    fn bad_files_name_the_option() {
        let e = parse("k.yaml", "vif_driver: nested-vxlan\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("k.yaml: option `vif_driver`: \"nested-vxlan\""),
            "{e}"
        );
        let e = parse("k.yaml", "pod_subnet: [a, b]\n").unwrap_err();
        assert!(e.to_string().contains("option `pod_subnet`"), "{e}");
        assert!(matches!(
            parse("k.yaml", "- a\n"),
            Err(SettingsError::NotMapping { .. })
        ));
        assert!(matches!(
            parse("k.yaml", "a: [\n"),
            Err(SettingsError::Yaml { .. })
        ));
    }

    #[test]
    fn flags_win_over_the_file_and_say_where_each_value_came_from() {
        let dir = std::env::temp_dir().join(format!("kuryrctl-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("kuryr.yaml");
        std::fs::write(
            &file,
            "pod_subnet: from-file\nservice_subnet: svc-file\nvif_driver: nested-macvlan\n",
        )
        .unwrap();
        let path = file.display().to_string();
        let s = resolve(&args(&["--config", &path, "--pod-subnet", "from-flag"])).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            s.pod_subnet,
            Some(Given {
                id: "from-flag".into(),
                from: "--pod-subnet".into()
            })
        );
        assert_eq!(
            s.service_subnet,
            Some(Given {
                id: "svc-file".into(),
                from: path
            })
        );
        assert_eq!(s.external_network, None);
        assert_eq!(s.vif_driver, VifType::NestedMacvlan);
        let s = resolve(&args(&["--vif-driver", "neutron-vif"])).unwrap();
        assert_eq!((s.vif_driver, s.pod_subnet), (VifType::NeutronVif, None));
        assert!(s.namespace_projects.is_empty());
        let s = resolve(&args(&["--namespace-projects", "p-a,p-b"])).unwrap();
        assert_eq!(s.namespace_projects, ["p-a", "p-b"]);
        let s = resolve(&args(&["--additional-subnets", "s-x"])).unwrap();
        assert_eq!(
            s.additional_subnets,
            vec![Given {
                id: "s-x".into(),
                from: "--additional-subnets".into()
            }]
        );
        assert!(matches!(
            resolve(&args(&["--config", "/nonexistent/kuryr.yaml"])),
            Err(SettingsError::Read { .. })
        ));
    }
}
