//! Octavia's list filters as Octavia 19 takes them (probed on the lab), where they differ from Neutron's:
//!
//! - a repeated attribute key (`?id=a&id=b`) is not an OR: the list reaches SQL as a row and the API
//!   answers **500**; repeated `tags`/`tags-any` keys are fine (tag lists);
//! - a key that is no attribute of the resource is **400** "One or more arguments are either duplicate or
//!   invalid" (Neutron ignores it);
//! - `loadbalancer_id` filters listeners and pools by the load balancer they belong to (it is no attribute
//!   of their answers, which list `loadbalancers: [{id}]`), and is a 400 on load balancers and monitors.

use axum::http::StatusCode;
use serde_json::Value;

use crate::errors::ApiError;
use crate::query::ListParams;

/// Refuses what real Octavia refuses; `items` are the rendered objects of `coll`.
pub fn check(params: &ListParams, coll: &str, items: &[Value]) -> Result<(), ApiError> {
    for (key, values) in &params.filters {
        if values.len() > 1 {
            return Err(ApiError::octavia(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "(pymysql.err.OperationalError) (4078, \"Illegal parameter data types varchar and row \
                     for operation '='\") [filter {key}]"
                ),
            ));
        }
        let known = match key.as_str() {
            "loadbalancer_id" => by_loadbalancer(coll),
            // Without an object to look at, any attribute may be one.
            k => items.is_empty() || items.iter().any(|o| o.get(k).is_some()),
        };
        if !known {
            return Err(ApiError::octavia(
                StatusCode::BAD_REQUEST,
                "One or more arguments are either duplicate or invalid",
            ));
        }
    }
    Ok(())
}

fn by_loadbalancer(coll: &str) -> bool {
    matches!(coll, "listeners" | "pools")
}

/// `params` with `loadbalancer_id` taken out, and whether `obj` belongs to the load balancer it named.
pub fn loadbalancer_filter(params: &mut ListParams) -> Option<String> {
    let pos = params.filters.iter().position(|(k, _)| k == "loadbalancer_id")?;
    let (_, values) = params.filters.remove(pos);
    values.into_iter().next()
}

pub fn belongs_to(obj: &Value, lb_id: &str) -> bool {
    obj.get("loadbalancers")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|l| l.get("id").and_then(Value::as_str) == Some(lb_id))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Query;
    use serde_json::json;

    fn params(q: &str) -> ListParams {
        ListParams::from_query(&Query::parse(Some(q)), &[])
    }

    #[test]
    fn repeated_attribute_keys_fail_as_on_real_octavia_but_tags_do_not() {
        let items = vec![json!({"id": "a", "tags": ["x"]})];
        let err = check(&params("id=a&id=b"), "loadbalancers", &items).unwrap_err();
        assert_eq!(err.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(check(&params("tags=x&tags=y&id=a"), "loadbalancers", &items).is_ok());
    }

    #[test]
    fn unknown_keys_are_refused_and_loadbalancer_id_is_known_to_listeners_and_pools_only() {
        let items = vec![json!({"id": "a", "loadbalancers": [{"id": "lb"}]})];
        let err = check(&params("foo=bar"), "pools", &items).unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
        assert!(check(&params("loadbalancer_id=lb"), "pools", &items).is_ok());
        assert!(check(&params("loadbalancer_id=lb"), "healthmonitors", &items).is_err());
        let mut p = params("loadbalancer_id=lb&id=a");
        assert_eq!(loadbalancer_filter(&mut p).as_deref(), Some("lb"));
        assert!(belongs_to(&items[0], "lb") && !belongs_to(&items[0], "other"));
        assert_eq!(p.filters.len(), 1);
    }
}
