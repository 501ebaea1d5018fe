//! RBAC in deploy/rbac/ is least privilege: every rule is listed per role, API group and resource with its
//! verbs, and compared with the table committed in docs/security.md (between the `rbac-table` markers), so
//! a widening is a failing diff that names the new permission. Wildcards, `nonResourceURLs`, Secrets and the
//! verbs that lead to escalation (`escalate`, `bind`, `impersonate`) fail outright, and every binding must
//! bind one of these roles to one of these ServiceAccounts.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns panic on failure, as they should

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Deserialize;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[derive(Debug, Deserialize)]
struct Doc {
    kind: String,
    metadata: Meta,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(rename = "roleRef")]
    role_ref: Option<RoleRef>,
    #[serde(default)]
    subjects: Vec<Subject>,
}

#[derive(Debug, Deserialize)]
struct Meta {
    name: String,
    namespace: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Rule {
    #[serde(rename = "apiGroups", default)]
    api_groups: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(rename = "resourceNames", default)]
    resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs", default)]
    non_resource_urls: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RoleRef {
    kind: String,
    name: String,
}

#[derive(Debug, Deserialize)]
struct Subject {
    kind: String,
    name: String,
    namespace: Option<String>,
}

/// Every object of every YAML file in `deploy/rbac/`.
fn load(dir: &std::path::Path) -> Vec<(String, Doc)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        for d in serde_yaml::Deserializer::from_str(&text) {
            let v = serde_yaml::Value::deserialize(d).unwrap();
            if v.is_null() {
                continue;
            }
            out.push((name.clone(), serde_yaml::from_value(v).unwrap()));
        }
    }
    out
}

/// `role -> (group, resource) -> verbs`, and the problems no table may contain.
type Table = BTreeMap<String, BTreeMap<(String, String), BTreeSet<String>>>;

fn table(docs: &[(String, Doc)]) -> (Table, Vec<String>) {
    let mut t = Table::new();
    let mut bad = Vec::new();
    for (file, d) in docs {
        if d.kind != "ClusterRole" && d.kind != "Role" {
            continue;
        }
        let role = match &d.metadata.namespace {
            Some(ns) => format!("{}/{ns}/{}", d.kind, d.metadata.name),
            None => format!("{}/{}", d.kind, d.metadata.name),
        };
        for r in &d.rules {
            let all = r.api_groups.iter().chain(&r.resources).chain(&r.verbs);
            if all.clone().any(|x| x.contains('*')) {
                bad.push(format!("{file}: {role}: wildcard in {r:?}"));
            }
            if !r.non_resource_urls.is_empty() {
                bad.push(format!(
                    "{file}: {role}: nonResourceURLs {:?}",
                    r.non_resource_urls
                ));
            }
            for v in &r.verbs {
                if matches!(v.as_str(), "escalate" | "bind" | "impersonate") {
                    bad.push(format!("{file}: {role}: verb {v} (privilege escalation)"));
                }
            }
            for res in &r.resources {
                if res == "secrets" || res.starts_with("secrets/") {
                    bad.push(format!("{file}: {role}: access to {res}"));
                }
                if r.api_groups.is_empty() || r.verbs.is_empty() {
                    bad.push(format!("{file}: {role}: rule without apiGroups or verbs: {r:?}"));
                }
                for g in &r.api_groups {
                    let group = if g.is_empty() {
                        "core".to_owned()
                    } else {
                        g.clone()
                    };
                    let res = if r.resource_names.is_empty() {
                        res.clone()
                    } else {
                        format!("{res} (names: {})", r.resource_names.join(","))
                    };
                    t.entry(role.clone())
                        .or_default()
                        .entry((group, res))
                        .or_default()
                        .extend(r.verbs.iter().cloned());
                }
            }
        }
    }
    (t, bad)
}

/// The table as the markdown rows docs/security.md carries.
fn render(t: &Table) -> Vec<String> {
    let mut rows = Vec::new();
    for (role, rules) in t {
        for ((group, res), verbs) in rules {
            let verbs: Vec<_> = verbs.iter().map(String::as_str).collect();
            rows.push(format!("| {role} | {group} | {res} | {} |", verbs.join(", ")));
        }
    }
    rows
}

/// The committed rows, between `<!-- rbac-table:begin -->` and `<!-- rbac-table:end -->`.
fn committed() -> Vec<String> {
    let doc = std::fs::read_to_string(repo().join("docs/security.md")).unwrap();
    let start = doc
        .find("<!-- rbac-table:begin -->")
        .expect("rbac-table:begin marker");
    let end = doc
        .find("<!-- rbac-table:end -->")
        .expect("rbac-table:end marker");
    doc[start..end]
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| role ") && !l.starts_with("| ---"))
        .map(|l| l.trim_end().to_owned())
        .collect()
}

fn diff(actual: &[String], expected: &[String]) -> Vec<String> {
    let (a, e): (BTreeSet<_>, BTreeSet<_>) = (actual.iter().collect(), expected.iter().collect());
    let mut out: Vec<String> = a
        .difference(&e)
        .map(|r| format!("+ {r}   (granted, not in the table)"))
        .collect();
    out.extend(
        e.difference(&a)
            .map(|r| format!("- {r}   (in the table, no longer granted)")),
    );
    out
}

#[test]
fn deploy_rbac_matches_the_committed_least_privilege_table() {
    let docs = load(&repo().join("deploy/rbac"));
    let (t, bad) = table(&docs);
    assert!(bad.is_empty(), "RBAC is not least privilege:\n{}", bad.join("\n"));
    assert!(t.contains_key("ClusterRole/kuryr-controller") && t.contains_key("ClusterRole/kuryr-daemon"));
    let d = diff(&render(&t), &committed());
    assert!(
        d.is_empty(),
        "deploy/rbac differs from the table in docs/security.md; if the change is meant, update the table \
         (and say why the permission is needed):\n{}",
        d.join("\n")
    );
}

#[test]
fn bindings_bind_our_roles_to_our_service_accounts() {
    let docs = load(&repo().join("deploy/rbac"));
    let roles: BTreeSet<(String, String)> = docs
        .iter()
        .filter(|(_, d)| d.kind == "ClusterRole" || d.kind == "Role")
        .map(|(_, d)| (d.kind.clone(), d.metadata.name.clone()))
        .collect();
    let accounts: BTreeSet<(String, String)> = docs
        .iter()
        .filter(|(_, d)| d.kind == "ServiceAccount")
        .map(|(_, d)| {
            (
                d.metadata.name.clone(),
                d.metadata.namespace.clone().unwrap_or_default(),
            )
        })
        .collect();
    let mut bindings = 0;
    for (file, d) in docs.iter().filter(|(_, d)| d.kind.ends_with("Binding")) {
        bindings += 1;
        let r = d.role_ref.as_ref().expect("roleRef");
        assert!(
            roles.contains(&(r.kind.clone(), r.name.clone())),
            "{file}: {} binds {} {}, which deploy/rbac does not define (e.g. cluster-admin)",
            d.metadata.name,
            r.kind,
            r.name
        );
        for s in &d.subjects {
            let ns = s.namespace.clone().unwrap_or_default();
            assert!(
                s.kind == "ServiceAccount" && accounts.contains(&(s.name.clone(), ns)),
                "{file}: {} binds {} {}: only our ServiceAccounts may be subjects",
                d.metadata.name,
                s.kind,
                s.name
            );
        }
    }
    assert!(bindings >= 3, "{bindings} bindings");
}

#[test]
fn the_checks_catch_a_widening() {
    // The same checks on a widened copy: a wildcard and a new verb must both be reported.
    let yaml = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\nrules:\n\
                - apiGroups: [\"\"]\n  resources: [\"pods\"]\n  verbs: [\"*\"]\n\
                - apiGroups: [\"\"]\n  resources: [\"secrets\"]\n  verbs: [\"get\"]\n";
    let docs = vec![("x.yaml".to_owned(), serde_yaml::from_str::<Doc>(yaml).unwrap())];
    let (t, bad) = table(&docs);
    assert!(bad.iter().any(|b| b.contains("wildcard")), "{bad:?}");
    assert!(bad.iter().any(|b| b.contains("secrets")), "{bad:?}");
    let d = diff(&render(&t), &["| ClusterRole/x | core | pods | get |".to_owned()]);
    assert!(
        d.iter()
            .any(|l| l.starts_with("+ | ClusterRole/x | core | pods | * |")),
        "{d:?}"
    );
}
