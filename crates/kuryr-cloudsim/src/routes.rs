//! Route registration that records each route's stable op name, so the pipeline can name every call
//! (and pick its latency and faults) from the matched route alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;

use crate::state::Shared;

pub type S = Arc<Shared>;

/// Neutron is served at the root (`/v2.0/...`) and under the catalog's `/networking`.
pub const NEUTRON: &[&str] = &["", "/networking"];
/// Octavia at the root (`/v2/lbaas/...`, `/v2.0/lbaas/...`) and under `/load-balancer`.
pub const OCTAVIA: &[&str] = &["", "/load-balancer"];
/// Keystone at the root (`/v3`) and under `/identity`.
pub const KEYSTONE: &[&str] = &["", "/identity"];

#[derive(Default)]
pub struct Routes {
    paths: BTreeMap<String, MethodRouter<S>>,
    ops: HashMap<(Method, String), &'static str>,
}

fn filter(m: &Method) -> MethodFilter {
    match *m {
        Method::POST => MethodFilter::POST,
        Method::PUT => MethodFilter::PUT,
        Method::DELETE => MethodFilter::DELETE,
        Method::PATCH => MethodFilter::PATCH,
        Method::HEAD => MethodFilter::HEAD,
        _ => MethodFilter::GET,
    }
}

impl Routes {
    /// Registers `handler` for `method path` under every prefix, all named `op`.
    pub fn add<H, T>(&mut self, prefixes: &[&str], method: Method, path: &str, op: &'static str, handler: H)
    where
        H: Handler<T, S> + Clone,
        T: 'static,
    {
        for prefix in prefixes {
            let full = if path == "/" && !prefix.is_empty() {
                (*prefix).to_owned()
            } else {
                format!("{prefix}{path}")
            };
            let mr = match self.paths.remove(&full) {
                Some(mr) => mr.on(filter(&method), handler.clone()),
                None => on(filter(&method), handler.clone()),
            };
            self.paths.insert(full.clone(), mr);
            self.ops.insert((method.clone(), full), op);
        }
    }

    pub fn get<H: Handler<T, S> + Clone, T: 'static>(
        &mut self,
        p: &[&str],
        path: &str,
        op: &'static str,
        h: H,
    ) {
        self.add(p, Method::GET, path, op, h);
    }

    pub fn post<H: Handler<T, S> + Clone, T: 'static>(
        &mut self,
        p: &[&str],
        path: &str,
        op: &'static str,
        h: H,
    ) {
        self.add(p, Method::POST, path, op, h);
    }

    pub fn put<H: Handler<T, S> + Clone, T: 'static>(
        &mut self,
        p: &[&str],
        path: &str,
        op: &'static str,
        h: H,
    ) {
        self.add(p, Method::PUT, path, op, h);
    }

    pub fn delete<H: Handler<T, S> + Clone, T: 'static>(
        &mut self,
        p: &[&str],
        path: &str,
        op: &'static str,
        h: H,
    ) {
        self.add(p, Method::DELETE, path, op, h);
    }

    pub fn into_parts(self) -> (Router<S>, OpTable) {
        let router = self
            .paths
            .into_iter()
            .fold(Router::new(), |r, (path, mr)| r.route(&path, mr));
        (router, OpTable(self.ops))
    }
}

/// (method, route pattern) -> op name.
#[derive(Debug, Default)]
pub struct OpTable(HashMap<(Method, String), &'static str>);

impl OpTable {
    pub fn op(&self, method: &Method, pattern: &str) -> Option<&'static str> {
        let m = if method == Method::HEAD && !self.0.contains_key(&(Method::HEAD, pattern.to_owned())) {
            &Method::GET
        } else {
            method
        };
        self.0.get(&(m.clone(), pattern.to_owned())).copied()
    }
}
