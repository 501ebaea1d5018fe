//! schemars transforms used by the CRD types.

use schemars::Schema;

/// For objects that must also accept upstream's shape (the typed VIF next to upstream's OVO blob):
/// - no property is required: Kubernetes < 1.28 validates the whole object on every update, so a typed field
///   missing from a migrated object would block even the removal of its finalizer;
/// - no property has a default: the apiserver would write our defaults into upstream-shaped objects.
pub fn accept_upstream_shape(schema: &mut Schema) {
    schema.remove("required");
    no_property_defaults(schema);
}

/// Drops the `default`s schemars derives from `#[serde(default)]` on direct properties. Needed for `""`:
/// kube-apiserver 1.20 reads an empty-string default sent by server-side apply as `null` and rejects the CRD.
pub fn no_property_defaults(schema: &mut Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for prop in props.values_mut() {
            if let Some(prop) = prop.as_object_mut() {
                prop.remove("default");
            }
        }
    }
}
