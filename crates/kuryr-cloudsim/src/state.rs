//! Shared state, the per-request context and deferred background transitions.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use axum::response::Response;
use serde::Serialize;
use serde_json::Value;

use crate::calllog::CallLog;
use crate::errors::{ApiError, ApiResult};
use crate::faults::Faults;
use crate::neutron::model::to_json;
use crate::neutron::respond::ok;
use crate::profile::{Dist, Profile};
use crate::query::{project, Query};
use crate::tokens::Tokens;
use crate::world::World;

pub struct Shared {
    world: Mutex<World>,
    profile: RwLock<Arc<Profile>>,
    pub faults: Mutex<Faults>,
    pub calls: Mutex<CallLog>,
    pub tokens: Mutex<Tokens>,
    rng: Mutex<fastrand::Rng>,
    /// Port creates (single or bulk) currently inside their latency window: drives IPAM conflicts.
    pub port_creates_in_flight: AtomicUsize,
    /// Requests in flight per service: the load model's input.
    pub in_flight: crate::load::InFlight,
}

/// Locks ignoring poisoning: a panicking handler must not take the whole emulator down.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn new(profile: Profile) -> Arc<Self> {
        let rng = profile
            .seed
            .map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
        Arc::new(Self {
            world: Mutex::new(World::new(&profile.neutron.quotas)),
            faults: Mutex::new(Faults {
                faults: profile.faults.clone(),
                lb_faults: profile.lb_faults.clone(),
            }),
            calls: Mutex::new(CallLog::new(profile.call_log_capacity)),
            tokens: Mutex::new(Tokens::default()),
            rng: Mutex::new(rng),
            profile: RwLock::new(Arc::new(profile)),
            port_creates_in_flight: AtomicUsize::new(0),
            in_flight: crate::load::InFlight::default(),
        })
    }

    pub fn world(&self) -> MutexGuard<'_, World> {
        lock(&self.world)
    }

    pub fn profile(&self) -> Arc<Profile> {
        self.profile
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_profile(&self, profile: Profile) {
        lock(&self.calls).set_capacity(profile.call_log_capacity);
        *self.profile.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(profile);
    }

    /// Forgets every resource, token, call and runtime fault; faults go back to the profile's.
    pub fn reset(&self) {
        let p = self.profile();
        *self.world() = World::new(&p.neutron.quotas);
        *lock(&self.faults) = Faults {
            faults: p.faults.clone(),
            lb_faults: p.lb_faults.clone(),
        };
        lock(&self.calls).clear();
        *lock(&self.tokens) = Tokens::default();
    }

    pub fn rng(&self) -> MutexGuard<'_, fastrand::Rng> {
        lock(&self.rng)
    }

    /// A fresh generator for a batch of work (keeps the shared one's lock short).
    pub fn fork_rng(&self) -> fastrand::Rng {
        fastrand::Rng::with_seed(self.rng().u64(..))
    }

    pub fn jobs(&self) -> Jobs {
        Jobs {
            list: Vec::new(),
            profile: self.profile(),
            rng: self.fork_rng(),
        }
    }

    /// Runs `f` on the locked world, then the jobs it queued once the lock is released.
    pub fn mutate<R>(self: &Arc<Self>, f: impl FnOnce(&mut World, &mut Jobs) -> R) -> R {
        let mut jobs = self.jobs();
        let result = {
            let mut w = self.world();
            f(&mut w, &mut jobs)
        };
        self.run_jobs(jobs);
        result
    }

    /// Serializes every resource of one map (the world lock is held only while collecting).
    pub fn all_json<T: Serialize>(&self, map: impl FnOnce(&World) -> &BTreeMap<String, T>) -> Vec<Value> {
        self.all_rendered(map, |_, x| to_json(x))
    }

    /// Like [`Shared::all_json`], for resources whose JSON needs the rest of the world (e.g. an SG's rules).
    pub fn all_rendered<T>(
        &self,
        map: impl FnOnce(&World) -> &BTreeMap<String, T>,
        render: impl Fn(&World, &T) -> Value,
    ) -> Vec<Value> {
        let w = self.world();
        map(&w).values().map(|x| render(&w, x)).collect()
    }

    /// GET of one resource: `{singular: ...}` projected by `?fields=`, or `not_found(id)`.
    pub fn show_json<T: Serialize>(
        &self,
        map: impl FnOnce(&World) -> &BTreeMap<String, T>,
        id: &str,
        singular: &str,
        not_found: impl FnOnce(&str) -> ApiError,
        q: Option<&str>,
    ) -> ApiResult<Response> {
        self.show_rendered(map, id, singular, not_found, q, |_, x| to_json(x))
    }

    /// Like [`Shared::show_json`], for resources whose JSON needs the rest of the world.
    pub fn show_rendered<T>(
        &self,
        map: impl FnOnce(&World) -> &BTreeMap<String, T>,
        id: &str,
        singular: &str,
        not_found: impl FnOnce(&str) -> ApiError,
        q: Option<&str>,
        render: impl FnOnce(&World, &T) -> Value,
    ) -> ApiResult<Response> {
        let v = {
            let w = self.world();
            map(&w)
                .get(id)
                .map(|x| render(&w, x))
                .ok_or_else(|| not_found(id))?
        };
        Ok(ok(singular, project(v, &Query::parse(q))))
    }

    /// Runs deferred transitions: zero delays now (so the next request already sees them), others on
    /// tokio timers. Call without holding the world lock.
    pub fn run_jobs(self: &Arc<Self>, jobs: Jobs) {
        let Jobs {
            mut list,
            profile,
            mut rng,
        } = jobs;
        while let Some((delay, f)) = list.pop() {
            if delay.is_zero() {
                let mut more = Jobs {
                    list: Vec::new(),
                    profile: profile.clone(),
                    rng: rng.fork(),
                };
                f(&mut self.world(), &mut more);
                list.extend(more.list);
            } else {
                let sh = self.clone();
                let mut more = Jobs {
                    list: Vec::new(),
                    profile: profile.clone(),
                    rng: rng.fork(),
                };
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    f(&mut sh.world(), &mut more);
                    sh.run_jobs(more);
                });
            }
        }
    }
}

pub type JobFn = Box<dyn FnOnce(&mut World, &mut Jobs) + Send>;

/// Transitions to apply after a delay, collected while the world is locked.
pub struct Jobs {
    list: Vec<(Duration, JobFn)>,
    pub profile: Arc<Profile>,
    pub rng: fastrand::Rng,
}

impl Jobs {
    pub fn at(&mut self, delay: Duration, f: impl FnOnce(&mut World, &mut Jobs) + Send + 'static) {
        self.list.push((delay, Box::new(f)));
    }

    /// A sample of `dist`, time-scaled.
    pub fn delay(&mut self, dist: &Dist) -> Duration {
        let ms = dist.sample_ms(&mut self.rng);
        self.profile.scaled(ms)
    }
}

/// What the pipeline learned about a request, handed to handlers as an extension.
#[derive(Debug, Clone, Default)]
pub struct Ctx {
    pub op: &'static str,
    /// Project of the token (keystone auth) or of `X-Project-Id` (noauth).
    pub project: Option<String>,
    /// The token has the admin role (noauth: always).
    pub admin: bool,
    /// `http://host:port` as the client addressed us.
    pub base_url: String,
    /// This port create must fail with an IPAM conflict.
    pub ipam_conflict: bool,
}

impl Ctx {
    /// The project a new resource belongs to: the body's, else the caller's, else the default. Naming a
    /// project other than the token's takes the admin role, as in Neutron (400 with its message).
    pub fn project_for(
        &self,
        body: &serde_json::Map<String, serde_json::Value>,
        default: &str,
    ) -> Result<String, ApiError> {
        let asked = body
            .get("project_id")
            .or_else(|| body.get("tenant_id"))
            .and_then(serde_json::Value::as_str);
        if let (Some(a), Some(own)) = (asked, &self.project) {
            if a != own && !self.admin {
                return Err(ApiError::bad_request(
                    "Specifying 'project_id' or 'tenant_id' other than the authenticated project in request \
                     requires admin privileges",
                ));
            }
        }
        Ok(asked
            .map(str::to_owned)
            .or_else(|| self.project.clone())
            .unwrap_or_else(|| default.to_owned()))
    }
}
