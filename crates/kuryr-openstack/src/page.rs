//! One page of a list answer (`{key: [T], key_links: [...]}`), read straight from its bytes into `T`s, and
//! the query of the page after it. A list is never held as a JSON tree: read as a `Value` first, a 6.5 MB
//! answer of 5,000 Neutron ports made ~35 MB of maps, most of a controller's peak at that size. Each
//! object still passes through a `Value` of its own, so that a `null` reads as the field's default.

use std::fmt;
use std::marker::PhantomData;

use reqwest::Url;
use serde::de::{
    DeserializeOwned, DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

use crate::client::strip_nulls;

/// The objects of one page, and its `<key>_links` when the service sent some.
#[derive(Debug)]
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    pub links: Option<Value>,
}

/// Reads `{key: [T], key_links: [...]}` from `body`; other members are skipped unparsed. An answer without
/// `key` is an error, as an empty list is `[]`.
pub(crate) fn read<T: DeserializeOwned>(body: &[u8], key: &str) -> serde_json::Result<Page<T>> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let page = PageSeed::<T> {
        key,
        links_key: format!("{key}_links"),
        item: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(page)
}

/// The query of the page after this one (the filters asked for plus the link's paging), if its links name
/// one.
pub(crate) fn next_query(links: Option<&Value>, asked: &[(String, String)]) -> Option<Vec<(String, String)>> {
    let href = links?
        .as_array()?
        .iter()
        .find(|l| l.get("rel").and_then(Value::as_str) == Some("next"))?
        .get("href")?
        .as_str()?;
    let url = Url::parse(href).ok()?;
    // Octavia's link keeps `limit` and the marker but drops the filters (following it as written lists
    // the whole project): the next page is the filters asked for plus the link's paging.
    let paging = |k: &str| PAGING_KEYS.contains(&k);
    let mut next: Vec<(String, String)> = asked.iter().filter(|(k, _)| !paging(k)).cloned().collect();
    next.extend(
        url.query_pairs()
            .filter(|(k, _)| paging(k))
            .map(|(k, v)| (k.into_owned(), v.into_owned())),
    );
    Some(next)
}

/// The query keys of paging (Neutron's and Octavia's), as opposed to filters.
const PAGING_KEYS: [&str; 3] = ["limit", "marker", "page_reverse"];

struct PageSeed<'k, T> {
    key: &'k str,
    links_key: String,
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Page<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object with a `{}` list", self.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page<T>, A::Error> {
        let (mut items, mut links) = (None, None);
        while let Some(k) = map.next_key::<String>()? {
            if k == self.key {
                items = Some(map.next_value_seed(Items::<T>(PhantomData))?);
            } else if k == self.links_key {
                links = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        let items = items.ok_or_else(|| A::Error::custom(format_args!("missing field `{}`", self.key)))?;
        Ok(Page { items, links })
    }
}

/// A list's objects, each read through its own `Value` (nulls dropped) into `T`.
struct Items<T>(PhantomData<T>);

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Items<T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Items<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(mut v) = seq.next_element::<Value>()? {
            strip_nulls(&mut v);
            out.push(T::deserialize(v).map_err(A::Error::custom)?);
        }
        out.shrink_to_fit();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(default)]
    struct Port {
        id: String,
        description: String,
        device_id: Option<String>,
    }

    #[test]
    fn a_page_reads_its_objects_with_nulls_as_defaults_and_keeps_its_links() {
        let body = json!({
            "ports": [{"id": "a", "description": null, "device_id": null, "fixed_ips": [{"x": 1}]},
                      {"id": "b", "description": "d", "device_id": "vm"}],
            "ports_links": [{"rel": "next", "href": "http://h/v2.0/ports?limit=2&marker=b"}],
            "other": {"deep": [1, 2, {"x": null}]}
        });
        let page: Page<Port> = read(&serde_json::to_vec(&body).unwrap(), "ports").unwrap();
        assert_eq!(
            page.items,
            vec![
                Port {
                    id: "a".into(),
                    ..Port::default()
                },
                Port {
                    id: "b".into(),
                    description: "d".into(),
                    device_id: Some("vm".into())
                }
            ]
        );
        assert_eq!(
            next_query(page.links.as_ref(), &[]),
            Some(vec![("limit".into(), "2".into()), ("marker".into(), "b".into())])
        );
    }

    #[test]
    fn an_answer_without_its_list_or_not_json_is_an_error() {
        assert!(read::<Port>(br#"{"networks": []}"#, "ports").is_err());
        assert!(read::<Port>(br#"{"ports": null}"#, "ports").is_err());
        assert!(read::<Port>(b"", "ports").is_err());
        assert!(read::<Port>(br#"{"ports": []} trailing"#, "ports").is_err());
        assert!(
            read::<Port>(br#"{"ports": [{"id": 5}]}"#, "ports").is_err(),
            "a wrong type"
        );
        let empty: Page<Port> = read(br#"{"ports": []}"#, "ports").unwrap();
        assert!(empty.items.is_empty() && empty.links.is_none());
    }

    #[test]
    fn next_page_comes_from_the_links() {
        let links = json!([
            {"rel": "previous", "href": "http://h/v2/lbaas/loadbalancers?marker=a&page_reverse=True"},
            {"rel": "next", "href": "http://h/v2/lbaas/loadbalancers?limit=2&marker=b"}]);
        let asked = vec![("tags".to_owned(), "kuryr.cluster=c1".to_owned())];
        let page2 = next_query(Some(&links), &asked);
        assert_eq!(
            page2,
            Some(vec![
                ("tags".into(), "kuryr.cluster=c1".into()),
                ("limit".into(), "2".into()),
                ("marker".into(), "b".into())
            ])
        );
        // Page 3: the marker of page 2's link replaces page 1's.
        let links = json!([{"rel": "next", "href": "http://h/v2/lbaas/loadbalancers?limit=2&marker=c"}]);
        assert_eq!(
            next_query(Some(&links), &page2.unwrap_or_default()),
            Some(vec![
                ("tags".into(), "kuryr.cluster=c1".into()),
                ("limit".into(), "2".into()),
                ("marker".into(), "c".into())
            ])
        );
        assert_eq!(next_query(None, &asked), None);
        assert_eq!(
            next_query(
                Some(&json!([{"rel": "previous", "href": "http://h/x?marker=a"}])),
                &asked
            ),
            None
        );
    }
}
