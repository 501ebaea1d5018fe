//! Ids, MAC addresses and timestamps in the formats the real services use.

use chrono::{SecondsFormat, Utc};

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Keystone-style 32-hex-digit id.
pub fn new_hex_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Neutron: `2026-11-22T10:15:00Z`.
pub fn neutron_now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Octavia: `2026-11-22T10:15:00` (no zone).
pub fn octavia_now() -> String {
    Utc::now().format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// Keystone: `2026-11-22T10:15:00.000000Z`.
pub fn keystone_time(t: chrono::DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

pub fn log_time() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// OpenStack's `fa:16:3e` prefix followed by a counter, so MACs are unique for the sim's lifetime.
pub fn mac_from_counter(n: u64) -> String {
    format!(
        "fa:16:3e:{:02x}:{:02x}:{:02x}",
        (n >> 16) & 0xff,
        (n >> 8) & 0xff,
        n & 0xff
    )
}
