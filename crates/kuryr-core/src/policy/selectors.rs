//! Label selectors as Kubernetes evaluates them, in a canonical form so that two spellings of the same
//! selector share one selector group.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use super::PolicyError;

pub type Labels = BTreeMap<String, String>;

/// One `matchExpressions` entry (and every `matchLabels` entry, as `In` with one value).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k) => k,
        }
    }

    fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            // A missing key satisfies NotIn, as in apimachinery.
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A label selector: the AND of its requirements; no requirement selects everything.
/// Requirements are kept sorted and deduplicated, values sorted: equal selectors compare equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that selects everything (`{}`).
    pub fn everything() -> Self {
        Self::default()
    }

    pub fn new(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        let mut requirements: Vec<Requirement> = requirements
            .into_iter()
            .map(|r| match r {
                Requirement::In(k, mut vs) => {
                    vs.sort();
                    vs.dedup();
                    Requirement::In(k, vs)
                }
                Requirement::NotIn(k, mut vs) => {
                    vs.sort();
                    vs.dedup();
                    Requirement::NotIn(k, vs)
                }
                other => other,
            })
            .collect();
        // By key first so the canonical text reads in label order.
        requirements.sort_by(|a, b| a.key().cmp(b.key()).then_with(|| a.cmp(b)));
        requirements.dedup();
        Self { requirements }
    }

    /// `matchLabels` only.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self::new(
            labels
                .into_iter()
                .map(|(k, v)| Requirement::In(k.to_owned(), vec![v.to_owned()])),
        )
    }

    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Converts a Kubernetes selector; an unknown operator or an `In`/`NotIn` without values is invalid
    /// (the API server rejects both, so this only guards against objects that bypassed validation).
    pub fn from_k8s(sel: &metav1::LabelSelector) -> Result<Self, PolicyError> {
        let mut reqs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push(Requirement::In(k.clone(), vec![v.clone()]));
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let req = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(PolicyError::InvalidSelector(format!(
                        "{} {} needs values",
                        e.key, e.operator
                    )))
                }
                "In" => Requirement::In(e.key.clone(), values),
                "NotIn" => Requirement::NotIn(e.key.clone(), values),
                "Exists" => Requirement::Exists(e.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
                other => return Err(PolicyError::InvalidSelector(format!("unknown operator {other}"))),
            };
            reqs.push(req);
        }
        Ok(Self::new(reqs))
    }
}

/// Canonical text, e.g. `app=web,tier in (a,b),!legacy`; `{}` selects everything. Used in keys.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.requirements.is_empty() {
            return f.write_str("{}");
        }
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::In(k, vs) if vs.len() == 1 => write!(f, "{k}={}", vs[0])?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Requirement::Exists(k) => write!(f, "{k}")?,
                Requirement::DoesNotExist(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> Labels {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn empty_selector_selects_everything() {
        assert!(LabelSelector::everything().matches(&Labels::new()));
        assert_eq!(LabelSelector::everything().to_string(), "{}");
    }

    #[test]
    fn not_in_matches_a_missing_key_and_in_does_not() {
        let not_in = LabelSelector::new([Requirement::NotIn("a".into(), vec!["x".into()])]);
        let is_in = LabelSelector::new([Requirement::In("a".into(), vec!["x".into()])]);
        assert!(not_in.matches(&labels(&[])));
        assert!(!is_in.matches(&labels(&[])));
        assert!(!not_in.matches(&labels(&[("a", "x")])));
    }

    #[test]
    fn equal_selectors_spelled_differently_are_equal() {
        let a = LabelSelector::new([
            Requirement::In("b".into(), vec!["2".into(), "1".into()]),
            Requirement::Exists("a".into()),
        ]);
        let b = LabelSelector::new([
            Requirement::Exists("a".into()),
            Requirement::In("b".into(), vec!["1".into(), "2".into(), "1".into()]),
        ]);
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "a,b in (1,2)");
    }

    #[test]
    fn k8s_selector_with_unknown_operator_is_rejected() {
        let sel = metav1::LabelSelector {
            match_expressions: Some(vec![metav1::LabelSelectorRequirement {
                key: "a".into(),
                operator: "Near".into(),
                values: None,
            }]),
            match_labels: None,
        };
        assert!(LabelSelector::from_k8s(&sel).is_err());
    }
}
