//! List queries shared by Neutron and Octavia: repeated-key filters (OR within a key, AND across keys),
//! tag filters, `fields`, `limit`/`marker`/`page_reverse` pagination and `sort_key`/`sort_dir`.

use serde_json::{Map, Value};

/// Query string pairs in order, percent-decoded.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub pairs: Vec<(String, String)>,
    raw: String,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let raw = raw.unwrap_or("");
        let pairs = form_urlencoded::parse(raw.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        Self {
            pairs,
            raw: raw.to_owned(),
        }
    }

    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn first(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn flag(&self, key: &str) -> bool {
        self.first(key)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"))
    }

    pub fn raw(&self) -> &str {
        &self.raw
    }
}

const RESERVED: &[&str] = &[
    "fields",
    "limit",
    "marker",
    "page_reverse",
    "sort_key",
    "sort_dir",
    "tags",
    "tags-any",
    "not-tags",
    "not-tags-any",
];

/// A parsed list request.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    /// Attribute filters: key -> accepted values.
    pub filters: Vec<(String, Vec<String>)>,
    pub tags: Vec<String>,
    pub tags_any: Vec<String>,
    pub not_tags: Vec<String>,
    pub not_tags_any: Vec<String>,
    pub fields: Vec<String>,
    pub limit: Option<usize>,
    pub marker: Option<String>,
    pub page_reverse: bool,
    pub sort: Vec<(String, bool)>,
    /// Every other query pair (filters, fields, sort), repeated in the page links as real Neutron does;
    /// found by the kuryr-openstack conformance suite (a `next` link without the filters lists
    /// everything).
    pub carry: Vec<(String, String)>,
}

fn split_tags(q: &Query, key: &str) -> Vec<String> {
    q.all(key)
        .flat_map(|v| v.split(','))
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl ListParams {
    /// `skip` names keys the caller handles itself (e.g. Neutron's `fixed_ips`).
    pub fn from_query(q: &Query, skip: &[&str]) -> Self {
        let mut filters: Vec<(String, Vec<String>)> = Vec::new();
        for (k, v) in &q.pairs {
            if RESERVED.contains(&k.as_str()) || skip.contains(&k.as_str()) {
                continue;
            }
            match filters.iter_mut().find(|(fk, _)| fk == k) {
                Some((_, vals)) => vals.push(v.clone()),
                None => filters.push((k.clone(), vec![v.clone()])),
            }
        }
        let keys: Vec<String> = q.all("sort_key").map(str::to_owned).collect();
        let dirs: Vec<bool> = q
            .all("sort_dir")
            .map(|d| !d.eq_ignore_ascii_case("desc"))
            .collect();
        let sort = keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, dirs.get(i).copied().unwrap_or(true)))
            .collect();
        Self {
            filters,
            tags: split_tags(q, "tags"),
            tags_any: split_tags(q, "tags-any"),
            not_tags: split_tags(q, "not-tags"),
            not_tags_any: split_tags(q, "not-tags-any"),
            fields: q
                .all("fields")
                .flat_map(|v| v.split(','))
                .map(str::to_owned)
                .collect(),
            limit: q.first("limit").and_then(|l| l.parse().ok()).filter(|l| *l > 0),
            marker: q.first("marker").map(str::to_owned),
            page_reverse: q.flag("page_reverse"),
            sort,
            carry: q
                .pairs
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "limit" | "marker" | "page_reverse"))
                .cloned()
                .collect(),
        }
    }

    /// The single value of an equality filter, for index lookups.
    pub fn filter_values(&self, key: &str) -> Option<&[String]> {
        self.filters
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    pub fn tags_match(&self, tags: &[&str]) -> bool {
        self.tags.iter().all(|t| tags.contains(&t.as_str()))
            && (self.tags_any.is_empty() || self.tags_any.iter().any(|t| tags.contains(&t.as_str())))
            && (self.not_tags.is_empty() || !self.not_tags.iter().all(|t| tags.contains(&t.as_str())))
            && !self.not_tags_any.iter().any(|t| tags.contains(&t.as_str()))
    }

    pub fn has_tag_filters(&self) -> bool {
        !(self.tags.is_empty()
            && self.tags_any.is_empty()
            && self.not_tags.is_empty()
            && self.not_tags_any.is_empty())
    }

    /// Whether a rendered object passes every attribute and tag filter. Filters on attributes the
    /// object doesn't have are ignored.
    pub fn matches(&self, obj: &Value) -> bool {
        if self.has_tag_filters() {
            let tags: Vec<&str> = obj
                .get("tags")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if !self.tags_match(&tags) {
                return false;
            }
        }
        self.filters.iter().all(|(k, vals)| match obj.get(k) {
            None => true,
            Some(v) => vals.iter().any(|want| value_matches(v, want)),
        })
    }

    /// Sorts (when asked), paginates and projects `fields`; returns the page and whether more follow.
    pub fn page(&self, mut items: Vec<Value>) -> (Vec<Value>, bool) {
        if !self.sort.is_empty() {
            items.sort_by(|a, b| {
                for (k, asc) in &self.sort {
                    let o = cmp_values(a.get(k), b.get(k));
                    if o != std::cmp::Ordering::Equal {
                        return if *asc { o } else { o.reverse() };
                    }
                }
                std::cmp::Ordering::Equal
            });
        }
        if self.page_reverse {
            items.reverse();
        }
        if let Some(m) = &self.marker {
            if let Some(pos) = items
                .iter()
                .position(|v| v.get("id").and_then(Value::as_str) == Some(m))
            {
                items.drain(..=pos);
            }
        }
        let more = self.limit.is_some_and(|l| items.len() > l);
        if let Some(l) = self.limit {
            items.truncate(l);
        }
        if self.page_reverse {
            items.reverse();
        }
        if !self.fields.is_empty() {
            for it in &mut items {
                if let Value::Object(map) = it {
                    map.retain(|k, _| self.fields.iter().any(|f| f == k));
                }
            }
        }
        (items, more)
    }
}

fn value_matches(v: &Value, want: &str) -> bool {
    match v {
        Value::String(s) => s == want,
        Value::Bool(b) => {
            want.eq_ignore_ascii_case(if *b { "true" } else { "false" }) || want == if *b { "1" } else { "0" }
        }
        Value::Number(n) => n.to_string() == want,
        Value::Null => {
            want.is_empty() || want.eq_ignore_ascii_case("none") || want.eq_ignore_ascii_case("null")
        }
        Value::Array(a) => a.iter().any(|x| value_matches(x, want)),
        Value::Object(_) => false,
    }
}

fn cmp_values(a: Option<&Value>, b: Option<&Value>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => {
            x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0))
        }
        (Some(x), Some(y)) => x.as_str().unwrap_or("").cmp(y.as_str().unwrap_or("")),
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

/// `{collection: [...], collection_links: [...]}` with a `next` link when the page is full.
/// `next` (when the page is full) and `previous` (when paging from a marker) links.
pub fn page_links(
    params: &ListParams,
    more: bool,
    first: Option<&str>,
    last: Option<&str>,
    self_url: &str,
) -> Vec<Value> {
    let link = |limit: usize, marker: &str, reverse: bool| {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &params.carry {
            q.append_pair(k, v);
        }
        q.append_pair("limit", &limit.to_string());
        q.append_pair("marker", marker);
        if reverse {
            q.append_pair("page_reverse", "True");
        }
        format!("{self_url}?{}", q.finish())
    };
    let mut links = Vec::new();
    if let Some(limit) = params.limit {
        if let (true, Some(last)) = (more, last) {
            links.push(serde_json::json!({"rel": "next", "href": link(limit, last, false)}));
        }
        if let (true, Some(first)) = (params.marker.is_some(), first) {
            links.push(serde_json::json!({"rel": "previous", "href": link(limit, first, true)}));
        }
    }
    links
}

/// `{collection: [...], collection_links: [...]}` with a `next` link when the page is full.
pub fn list_body(
    collection: &str,
    items: Vec<Value>,
    more: bool,
    params: &ListParams,
    self_url: &str,
) -> Value {
    let id_of = |v: Option<&Value>| {
        v.and_then(|v| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (first, last) = (id_of(items.first()), id_of(items.last()));
    let links = page_links(params, more, first.as_deref(), last.as_deref(), self_url);
    let mut body = Map::new();
    body.insert(collection.to_owned(), Value::Array(items));
    if !links.is_empty() {
        body.insert(format!("{collection}_links"), Value::Array(links));
    }
    Value::Object(body)
}

/// Keep only `fields` of one object (`GET /x/{id}?fields=a`).
pub fn project(mut obj: Value, q: &Query) -> Value {
    let fields: Vec<&str> = q.all("fields").flat_map(|v| v.split(',')).collect();
    if !fields.is_empty() {
        if let Value::Object(map) = &mut obj {
            map.retain(|k, _| fields.contains(&k.as_str()));
        }
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeated_keys_or_and_tags_all() {
        let q = Query::parse(Some("device_owner=a&device_owner=b&tags=x,y&status=ACTIVE"));
        let p = ListParams::from_query(&q, &[]);
        let obj = json!({"device_owner": "b", "status": "ACTIVE", "tags": ["x", "y", "z"]});
        assert!(p.matches(&obj));
        let obj2 = json!({"device_owner": "c", "status": "ACTIVE", "tags": ["x", "y"]});
        assert!(!p.matches(&obj2));
        let obj3 = json!({"device_owner": "a", "status": "ACTIVE", "tags": ["x"]});
        assert!(!p.matches(&obj3));
    }

    #[test]
    fn not_tags_excludes_only_when_all_present() {
        let p = ListParams::from_query(&Query::parse(Some("not-tags=a,b")), &[]);
        assert!(p.matches(&json!({"tags": ["a"]})));
        assert!(!p.matches(&json!({"tags": ["a", "b"]})));
        let p = ListParams::from_query(&Query::parse(Some("not-tags-any=a,b")), &[]);
        assert!(!p.matches(&json!({"tags": ["a"]})));
    }

    #[test]
    fn pagination_with_marker_and_fields() {
        let items: Vec<Value> = (1..=5)
            .map(|i| json!({"id": format!("{i}"), "name": "n"}))
            .collect();
        let p = ListParams::from_query(&Query::parse(Some("limit=2&marker=2&fields=id")), &[]);
        let (page, more) = p.page(items);
        assert_eq!(page, vec![json!({"id": "3"}), json!({"id": "4"})]);
        assert!(more);
    }
}
