//! Annotations upstream Kuryr honoured that let whoever edits a Pod, Service or Namespace choose cloud
//! resources: `openstack.org/kuryr-project` (the annotation project driver) and
//! `k8s.v1.cni.cncf.io/networks` (extra networks, NPWG). kuryr-rs does not honour them on Pods and
//! Services: resources are made in the project and on the subnets the operator configured (a Namespace's
//! project annotation is honoured when the operator lists the project: [`crate::projects`]). Someone relying on them is told so with a
//! Warning Event (`AnnotationNotAllowed`); the object is served as if they were absent.

use std::collections::BTreeMap;

use kuryr_api::annotations;

use crate::lb::allow::ANNOTATION_NOT_ALLOWED;
use crate::lb::Problem;

/// `(annotation, why it has no effect)`.
pub const NOT_HONOURED: &[(&str, &str)] = &[
    (
        annotations::PROJECT,
        "a project is chosen per Namespace (and only among --namespace-projects), not per Pod or Service",
    ),
    (
        annotations::NPWG_NETWORKS,
        "no extra networks are attached: no --additional-subnets are configured",
    ),
];

/// One [`Problem`] per such annotation present (on a Pod or Service: a project is chosen per Namespace).
pub fn refused(annotations: Option<&BTreeMap<String, String>>) -> Vec<Problem> {
    refused_but(annotations, None)
}

/// [`refused`] for a Namespace: its project annotation is decided by
/// [`crate::projects::NamespaceProjects::for_namespace`], not here.
pub fn refused_on_namespace(annotations: Option<&BTreeMap<String, String>>) -> Vec<Problem> {
    refused_but(annotations, Some(annotations::PROJECT))
}

/// [`refused`] for a Pod when extra networks are served (`--additional-subnets`): those are decided by
/// [`crate::attachments::resolve`], not here.
pub fn refused_with_networks(annotations: Option<&BTreeMap<String, String>>) -> Vec<Problem> {
    refused_but(annotations, Some(annotations::NPWG_NETWORKS))
}

fn refused_but(annotations: Option<&BTreeMap<String, String>>, except: Option<&str>) -> Vec<Problem> {
    let Some(ann) = annotations else {
        return Vec::new();
    };
    NOT_HONOURED
        .iter()
        .filter(|(key, _)| Some(*key) != except)
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
        let on_ns = refused_on_namespace(Some(&ann));
        assert_eq!(on_ns.len(), 1, "{on_ns:?}");
        assert!(on_ns[0].message.contains("k8s.v1.cni.cncf.io/networks"));
        let served = refused_with_networks(Some(&ann));
        assert_eq!(served.len(), 1, "{served:?}");
        assert!(served[0].message.contains("kuryr-project"));
    }
}
