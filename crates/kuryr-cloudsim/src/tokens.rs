//! The tokens Keystone issued, held in the shared state ([`crate::state::Shared`]) that the Neutron and
//! Octavia handlers check each request's `X-Auth-Token` against.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

#[derive(Debug, Clone)]
pub struct Token {
    pub user_id: String,
    pub user_name: String,
    pub project_id: String,
    pub project_name: String,
    pub roles: Vec<String>,
    pub methods: Vec<String>,
    pub issued_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub audit_id: String,
    pub app_cred: Option<String>,
}

#[derive(Debug, Default)]
pub struct Tokens {
    map: HashMap<String, Token>,
}

impl Tokens {
    /// The token if it exists and has not expired.
    pub fn valid(&self, id: &str) -> Option<&Token> {
        self.map.get(id).filter(|t| t.expires_at > Utc::now())
    }

    pub(crate) fn insert(&mut self, id: String, t: Token) {
        if self.map.len() > 50_000 {
            let now = Utc::now();
            self.map.retain(|_, t| t.expires_at > now);
        }
        self.map.insert(id, t);
    }

    /// Revokes one token.
    pub(crate) fn remove(&mut self, id: &str) -> Option<Token> {
        self.map.remove(id)
    }

    /// Makes every token expired now (tests of re-authentication).
    pub fn expire_all(&mut self) -> usize {
        let past = Utc::now() - chrono::Duration::seconds(1);
        for t in self.map.values_mut() {
            t.expires_at = past;
        }
        self.map.len()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
