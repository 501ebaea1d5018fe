//! A project per namespace (upstream's annotation project driver, held to the operator's list): a Namespace
//! annotated `openstack.org/kuryr-project: <project id>` has its pods' ports, its network and subnet and
//! its NetworkPolicies' security groups made in that project, when `--namespace-projects` lists it. A
//! project not listed is refused (`ProjectNotAllowed`) and the namespace served in the controller's
//! project, as without the annotation: whoever may annotate a Namespace must not reach into any project the
//! controller's credentials can.

use std::collections::{BTreeMap, BTreeSet};

use kuryr_api::annotations;

use crate::lb::allow::PROJECT_NOT_ALLOWED;
use crate::lb::Problem;

/// The projects Namespaces may be put in, besides the controller's own (`--project-id` or the token's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceProjects {
    allowed: BTreeSet<String>,
}

/// Where a namespace's resources go, and why not where it asked when it was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectChoice {
    pub project_id: String,
    pub refused: Option<Problem>,
}

impl NamespaceProjects {
    pub fn new(allowed: impl IntoIterator<Item = String>) -> Self {
        Self {
            allowed: allowed
                .into_iter()
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect(),
        }
    }

    /// Whether any namespace may have a project of its own (else the annotation is not honoured at all).
    pub fn enabled(&self) -> bool {
        !self.allowed.is_empty()
    }

    /// The listed projects.
    pub fn listed(&self) -> impl Iterator<Item = &str> {
        self.allowed.iter().map(String::as_str)
    }

    /// The project for a Namespace with `ns_annotations`: the one it names when listed, else `default`.
    pub fn for_namespace(
        &self,
        ns_annotations: Option<&BTreeMap<String, String>>,
        default: &str,
    ) -> ProjectChoice {
        let asked = ns_annotations
            .and_then(|a| a.get(annotations::PROJECT))
            .map(|p| p.trim())
            .filter(|p| !p.is_empty());
        let Some(asked) = asked else {
            return ProjectChoice {
                project_id: default.to_owned(),
                refused: None,
            };
        };
        if asked == default || self.allowed.contains(asked) {
            return ProjectChoice {
                project_id: asked.to_owned(),
                refused: None,
            };
        }
        let message = if self.enabled() {
            format!(
                "{}={asked:?} is not in --namespace-projects: the namespace is served in the controller's project",
                annotations::PROJECT
            )
        } else {
            format!(
                "{}={asked:?} is not honoured: no --namespace-projects are configured, resources are made in \
                 the controller's project",
                annotations::PROJECT
            )
        };
        ProjectChoice {
            project_id: default.to_owned(),
            refused: Some(Problem::new(PROJECT_NOT_ALLOWED, message)),
        }
    }

    /// The project a recorded spec names (an operator-only field, still held to the list), else `default`.
    pub fn recorded<'a>(&self, recorded: Option<&'a str>, default: &'a str) -> &'a str {
        match recorded {
            Some(p) if p == default || self.allowed.contains(p) => p,
            _ => default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: &str = "home-project";

    fn ann(project: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(annotations::PROJECT.to_owned(), project.to_owned())])
    }

    #[test]
    fn a_listed_project_is_the_namespaces_an_unlisted_one_is_refused_with_the_reason() {
        let p = NamespaceProjects::new(["tenant-a".to_owned(), " ".to_owned()]);
        assert!(p.enabled());
        assert_eq!(p.listed().collect::<Vec<_>>(), ["tenant-a"]);
        let yes = p.for_namespace(Some(&ann("tenant-a")), HOME);
        assert_eq!((yes.project_id.as_str(), yes.refused), ("tenant-a", None));
        let no = p.for_namespace(Some(&ann("tenant-b")), HOME);
        assert_eq!(no.project_id, HOME);
        let why = no.refused.expect("refused");
        assert_eq!(why.reason, PROJECT_NOT_ALLOWED);
        assert!(why.message.contains("\"tenant-b\"") && why.message.contains("--namespace-projects"));
    }

    #[test]
    fn without_the_annotation_or_a_list_the_controllers_project_is_used() {
        let none = NamespaceProjects::default();
        assert!(!none.enabled());
        assert_eq!(none.for_namespace(None, HOME).project_id, HOME);
        assert_eq!(none.for_namespace(Some(&ann("  ")), HOME).refused, None);
        let off = none.for_namespace(Some(&ann("tenant-a")), HOME);
        assert_eq!(off.project_id, HOME);
        assert!(off.refused.expect("refused").message.contains("not honoured"));
        // Naming the controller's own project asks for nothing new.
        assert_eq!(none.for_namespace(Some(&ann(HOME)), HOME).refused, None);
    }

    #[test]
    fn a_recorded_project_outside_the_list_falls_back_to_the_controllers() {
        let p = NamespaceProjects::new(["tenant-a".to_owned()]);
        assert_eq!(p.recorded(Some("tenant-a"), HOME), "tenant-a");
        assert_eq!(p.recorded(Some("tenant-z"), HOME), HOME);
        assert_eq!(p.recorded(None, HOME), HOME);
        assert_eq!(p.recorded(Some(HOME), HOME), HOME);
    }
}
