//! Annotations upstream Kuryr honoured that let whoever edits a Pod, Service or Namespace choose cloud
//! resources: `openstack.org/kuryr-project` (the annotation project driver) and
//! `k8s.v1.cni.cncf.io/networks` (extra networks, NPWG). kuryr-rs does not honour them: resources are made
//! in the project and on the subnets the operator configured. Someone relying on them is told so with a
//! Warning Event (`AnnotationNotAllowed`); the object is served as if they were absent.

use std::collections::BTreeMap;

use kuryr_api::annotations;

use crate::lb::allow::ANNOTATION_NOT_ALLOWED;
use crate::lb::Problem;

/// `(annotation, why it has no effect)`.
pub const NOT_HONOURED: &[(&str, &str)] = &[
    (
        annotations::PROJECT,
        "resources are made in the project the operator configured, not one an annotation names",
    ),
    (
        annotations::NPWG_NETWORKS,
        "no extra networks are attached: pods get ports on the subnets the operator configured",
    ),
];

/// One [`Problem`] per such annotation present.
pub fn refused(annotations: Option<&BTreeMap<String, String>>) -> Vec<Problem> {
    let Some(ann) = annotations else {
        return Vec::new();
    };
    NOT_HONOURED
        .iter()
        .filter_map(|(key, why)| {
            let value = ann.get(*key)?;
            Some(Problem::new(
                ANNOTATION_NOT_ALLOWED,
                format!("{key}={value:?} is not honoured: {why}"),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_and_extra_network_annotations_are_refused_and_others_ignored() {
        assert!(refused(None).is_empty());
        let ann: BTreeMap<String, String> = [
            (annotations::PROJECT, "other-tenant"),
            (annotations::NPWG_NETWORKS, "corp-net"),
            (annotations::TIMEOUT_CLIENT_DATA, "5000"),
            ("example.com/x", "y"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let r = refused(Some(&ann));
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r.iter().all(|p| p.reason == ANNOTATION_NOT_ALLOWED));
        assert!(
            r[0].message
                .contains("openstack.org/kuryr-project=\"other-tenant\""),
            "{}",
            r[0].message
        );
        assert!(r[1].message.contains("k8s.v1.cni.cncf.io/networks"));
    }
}
