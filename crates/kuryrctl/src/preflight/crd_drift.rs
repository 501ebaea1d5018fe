//! Is a Kuryr CRD in the cluster the one this build generates (`kuryr_api::crds::crds()`)? Group, scope,
//! the names this build sets and every version (served, storage, schema, subresources, printer columns)
//! must be equal. What the API server adds on its own (`names.listKind`, `conversion`) is not compared.

use kuryr_api::CustomResourceDefinition;
use serde_json::Value;

/// The first difference of `installed` from `built`, in words; `None` when they are the same.
pub fn drift(built: &CustomResourceDefinition, installed: &CustomResourceDefinition) -> Option<String> {
    let (b, i) = (&built.spec, &installed.spec);
    if b.group != i.group {
        return Some(format!("group {} in the cluster, {} here", i.group, b.group));
    }
    if b.scope != i.scope {
        return Some(format!("scope {} in the cluster, {} here", i.scope, b.scope));
    }
    if let Some(d) = difference("names", &json(&b.names), &json(&i.names), Keys::BuiltOnly) {
        return Some(d);
    }
    for bv in &b.versions {
        let Some(iv) = i.versions.iter().find(|v| v.name == bv.name) else {
            return Some(format!("version {} is not in the cluster", bv.name));
        };
        if let Some(d) = difference("", &json(bv), &json(iv), Keys::Both) {
            return Some(format!("version {}: {d}", bv.name));
        }
    }
    i.versions
        .iter()
        .find(|iv| !b.versions.iter().any(|bv| bv.name == iv.name))
        .map(|iv| format!("version {} is in the cluster only", iv.name))
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    // These types always serialize; Null would only make a difference show, never hide one.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Which object keys count: all of both sides, or only those the built side sets (fields the API server
/// fills in by default).
#[derive(Clone, Copy)]
enum Keys {
    Both,
    BuiltOnly,
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

fn difference(at: &str, built: &Value, installed: &Value, keys: Keys) -> Option<String> {
    match (built, installed) {
        (Value::Object(b), Value::Object(i)) => {
            for (k, bv) in b {
                let path = join(at, k);
                match i.get(k) {
                    None => return Some(format!("{path} is not in the cluster")),
                    Some(iv) => {
                        if let Some(d) = difference(&path, bv, iv, keys) {
                            return Some(d);
                        }
                    }
                }
            }
            match keys {
                Keys::BuiltOnly => None,
                Keys::Both => i
                    .keys()
                    .find(|k| !b.contains_key(*k))
                    .map(|k| format!("{} is in the cluster only", join(at, k))),
            }
        }
        (Value::Array(b), Value::Array(i)) if b.len() == i.len() => b
            .iter()
            .zip(i)
            .enumerate()
            .find_map(|(n, (bv, iv))| difference(&format!("{at}[{n}]"), bv, iv, keys)),
        _ if built == installed => None,
        _ => Some(format!("{at} differs")),
    }
}

#[cfg(test)]
mod tests {
    use kuryr_api::crds::crds;

    use super::*;

    /// What the API server hands back for an applied CRD: its defaults filled in.
    fn as_stored(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
        crd.spec.conversion = serde_json::from_value(serde_json::json!({"strategy": "None"})).ok();
        crd
    }

    fn kuryrport() -> CustomResourceDefinition {
        crds().remove(0)
    }

    #[test]
    fn the_same_crd_with_server_defaults_is_no_drift() {
        for crd in crds() {
            assert_eq!(drift(&crd, &as_stored(crd.clone())), None);
        }
    }

    #[test]
    fn a_property_missing_from_the_installed_schema_is_named() {
        let built = kuryrport();
        let mut installed = as_stored(built.clone());
        let schema = installed.spec.versions[0]
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .unwrap();
        schema.properties.as_mut().unwrap().remove("status");
        let d = drift(&built, &installed).unwrap();
        assert_eq!(
            d,
            "version v1: schema.openAPIV3Schema.properties.status is not in the cluster"
        );
    }

    #[test]
    fn an_extra_property_a_printer_column_and_versions_count() {
        let built = kuryrport();
        let mut extra = as_stored(built.clone());
        let props = extra.spec.versions[0]
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .unwrap();
        let spec = props["spec"].clone();
        props.insert("legacy".into(), spec);
        assert_eq!(
            drift(&built, &extra).unwrap(),
            "version v1: schema.openAPIV3Schema.properties.legacy is in the cluster only"
        );

        let mut column = as_stored(built.clone());
        column.spec.versions[0]
            .additional_printer_columns
            .as_mut()
            .unwrap()
            .pop();
        assert!(drift(&built, &column)
            .unwrap()
            .starts_with("version v1: additionalPrinterColumns"));

        let mut v2 = as_stored(built.clone());
        let mut second = v2.spec.versions[0].clone();
        second.name = "v2".into();
        second.storage = false;
        v2.spec.versions.push(second);
        assert_eq!(drift(&built, &v2).unwrap(), "version v2 is in the cluster only");

        let mut unserved = as_stored(built.clone());
        unserved.spec.versions[0].served = false;
        assert_eq!(drift(&built, &unserved).unwrap(), "version v1: served differs");

        let mut renamed = as_stored(built.clone());
        renamed.spec.versions[0].name = "v1beta1".into();
        assert_eq!(
            drift(&built, &renamed).unwrap(),
            "version v1 is not in the cluster"
        );
    }

    #[test]
    fn names_the_build_sets_must_match() {
        let built = kuryrport();
        let mut installed = as_stored(built.clone());
        installed.spec.names.short_names = Some(vec!["kup".into()]);
        assert_eq!(drift(&built, &installed).unwrap(), "names.shortNames[0] differs");
        let mut cluster = as_stored(built.clone());
        cluster.spec.scope = "Cluster".into();
        assert!(drift(&built, &cluster).unwrap().starts_with("scope Cluster"));
    }
}
