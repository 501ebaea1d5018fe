//! Kubernetes-style status conditions (the shape of `metav1.Condition`) and the helper that updates
//! them without resetting `lastTransitionTime` when nothing transitioned.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition type every Kuryr CRD reports: the cloud side matches the spec.
pub const READY: &str = "Ready";

/// Whether a condition holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn from_bool(value: bool) -> Self {
        if value {
            Self::True
        } else {
            Self::False
        }
    }
}

/// One entry of `status.conditions`; the JSON shape of `metav1.Condition`, except that an empty `reason` or
/// `message` is left out (some apiservers built with newer Go reject `""` in custom resources as `null`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::no_property_defaults)]
pub struct Condition {
    /// CamelCase condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 316))]
    pub type_: String,
    pub status: ConditionStatus,
    /// CamelCase machine-readable reason for the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub reason: String,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 32768))]
    pub message: String,
    /// When `status` last changed (not when the condition was last written).
    pub last_transition_time: Time,
    /// `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition stamped with the current time.
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(whole_seconds(Timestamp::now())),
            observed_generation: None,
        }
    }

    pub fn with_observed_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }

    pub fn with_transition_time(mut self, time: Timestamp) -> Self {
        self.last_transition_time = Time(whole_seconds(time));
        self
    }

    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// `t` to the second, as the API server keeps a `metav1.Time` (RFC 3339, no fraction): a condition stamped
/// with nanoseconds never equalled what the watch brought back, so a written status was never recognised in
/// the cache (the KuryrPort book held every one for the life of its object).
fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// Sets `new` in `conditions`, replacing the entry of the same type. When the status did not change the old
/// `lastTransitionTime` is kept, so it keeps saying when the status last flipped. Returns whether anything
/// changed, which lets callers skip a no-op status write.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            if *old == new {
                return false;
            }
            *old = new;
            true
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

/// Removes the condition of `type_`; returns whether one was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True only when the condition exists and is `True` (absent means not known to be true).
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(Condition::is_true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    /// What this controller writes is what the watch brings back: the API server keeps whole seconds.
    #[test]
    fn a_condition_comes_back_from_the_api_server_as_written() {
        let stamped = |c: Condition| {
            let back: Condition = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
            assert_eq!(back, c);
        };
        stamped(Condition::new(READY, ConditionStatus::True, "Wired", ""));
        let t = Timestamp::from_second(10).unwrap() + std::time::Duration::from_millis(750);
        stamped(Condition::new(READY, ConditionStatus::False, "X", "y").with_transition_time(t));
    }

    fn ready(status: ConditionStatus, reason: &str, secs: i64) -> Condition {
        Condition::new(READY, status, reason, "").with_transition_time(at(secs))
    }

    #[test]
    fn adding_a_new_condition_appends_it() {
        let mut conditions = vec![];
        assert!(set_condition(
            &mut conditions,
            ready(ConditionStatus::False, "Creating", 10)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time.0, at(10));
    }

    #[test]
    fn same_status_keeps_last_transition_time_but_updates_reason() {
        let mut conditions = vec![ready(ConditionStatus::False, "Creating", 10)];
        let changed = set_condition(
            &mut conditions,
            ready(ConditionStatus::False, "WaitingForActive", 20),
        );
        assert!(changed);
        assert_eq!(conditions[0].reason, "WaitingForActive");
        assert_eq!(conditions[0].last_transition_time.0, at(10));
    }

    #[test]
    fn status_change_moves_last_transition_time() {
        let mut conditions = vec![ready(ConditionStatus::False, "Creating", 10)];
        assert!(set_condition(
            &mut conditions,
            ready(ConditionStatus::True, "Active", 20)
        ));
        assert_eq!(conditions.len(), 1);
        assert!(conditions[0].is_true());
        assert_eq!(conditions[0].last_transition_time.0, at(20));
    }

    #[test]
    fn identical_condition_reports_no_change() {
        let mut conditions = vec![ready(ConditionStatus::True, "Active", 10)];
        // Only the timestamp differs, and it is ignored while the status holds.
        assert!(!set_condition(
            &mut conditions,
            ready(ConditionStatus::True, "Active", 99)
        ));
        assert_eq!(conditions[0].last_transition_time.0, at(10));
    }

    #[test]
    fn observed_generation_change_counts_as_change() {
        let mut conditions =
            vec![ready(ConditionStatus::True, "Active", 10).with_observed_generation(Some(1))];
        let next = ready(ConditionStatus::True, "Active", 20).with_observed_generation(Some(2));
        assert!(set_condition(&mut conditions, next));
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(conditions[0].last_transition_time.0, at(10));
    }

    #[test]
    fn other_condition_types_are_left_alone() {
        let other = Condition::new("Degraded", ConditionStatus::False, "AllMembersUp", "")
            .with_transition_time(at(5));
        let mut conditions = vec![other.clone(), ready(ConditionStatus::False, "Creating", 10)];
        set_condition(&mut conditions, ready(ConditionStatus::True, "Active", 20));
        assert_eq!(conditions[0], other);
        assert!(is_condition_true(&conditions, READY));
        assert!(!is_condition_true(&conditions, "Degraded"));
        assert!(!is_condition_true(&conditions, "Missing"));
    }

    #[test]
    fn remove_condition_reports_presence() {
        let mut conditions = vec![ready(ConditionStatus::True, "Active", 10)];
        assert!(remove_condition(&mut conditions, READY));
        assert!(!remove_condition(&mut conditions, READY));
        assert!(find_condition(&conditions, READY).is_none());
    }

    #[test]
    fn serializes_like_metav1_condition() {
        let c = ready(ConditionStatus::True, "Active", 0).with_observed_generation(Some(3));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "Ready",
                "status": "True",
                "reason": "Active",
                "lastTransitionTime": "1970-01-01T00:00:00Z",
                "observedGeneration": 3,
            })
        );
        let back: Condition = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn from_bool_maps_to_true_false() {
        assert_eq!(ConditionStatus::from_bool(true), ConditionStatus::True);
        assert_eq!(ConditionStatus::from_bool(false), ConditionStatus::False);
    }
}
