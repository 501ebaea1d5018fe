//! Serving one request: ADD waits for active VIFs then binds (a neutron-vif VIF: binds, then waits for it
//! to go active); DEL is idempotent and never waits; CHECK
//! compares the interfaces with the KuryrPort.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::cache::NodeCache;
use super::metrics::Metrics;
use super::wait::{evaluate, wait_for_vifs, Phase, Verdict};
use crate::binding::{BindError, Binder};
use crate::cni::{codes, CniError, CniRequest, CniResult, Command, IfaceResult, IpResult, RouteResult};
use crate::protocol::DaemonResponse;

#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// How long ADD waits for the KuryrPort's VIFs to be active (upstream: 60 s).
    pub add_timeout: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            add_timeout: Duration::from_secs(60),
        }
    }
}

/// What one successful ADD wired, for its DEL and for GC.
#[derive(Clone, Debug)]
struct Attachment {
    pod: String,
    netns: String,
    /// Interfaces in the pod, the default (CNI_IFNAME) first.
    ifnames: Vec<String>,
    host_ifnames: Vec<String>,
}

pub struct Daemon<B> {
    cache: Arc<NodeCache>,
    binder: B,
    cfg: DaemonConfig,
    /// By container id: only the sandbox that was wired may remove shared host-side devices.
    attachments: Mutex<HashMap<String, Attachment>>,
    pub metrics: Metrics,
}

fn bind_error(e: BindError) -> CniError {
    match e {
        BindError::Check(m) => CniError::new(codes::CHECK_FAILED, m, ""),
        // A leftover we could not clear: worth another try once the runtime cleans up.
        e if e.is_conflict() => {
            CniError::new(codes::TRY_AGAIN_LATER, "interface still in use", e.to_string())
        }
        e => CniError::new(
            codes::BINDING_FAILED,
            "binding the pod interface failed",
            e.to_string(),
        ),
    }
}

impl<B: Binder> Daemon<B> {
    pub fn new(cache: Arc<NodeCache>, binder: B, cfg: DaemonConfig) -> Self {
        Self {
            cache,
            binder,
            cfg,
            attachments: Mutex::default(),
            metrics: Metrics::default(),
        }
    }

    pub fn cache(&self) -> &Arc<NodeCache> {
        &self.cache
    }

    fn attachments(&self) -> std::sync::MutexGuard<'_, HashMap<String, Attachment>> {
        self.attachments.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub async fn handle(&self, req: CniRequest) -> DaemonResponse {
        let started = Instant::now();
        let pod = req.pod.as_ref().map(|p| p.key()).unwrap_or_default();
        // containerd 2 asks for STATUS every few seconds (CNI 1.1): a successful one is not worth a log line.
        let quiet = req.command == Command::Status;
        if !quiet {
            info!(command = %req.command, %pod, container = %req.container_id, netns = %req.netns, "request");
        }
        let res = match req.command {
            Command::Add => self.add(&req).await.map(Some),
            Command::Del => self.del(&req).await.map(|()| None),
            Command::Check => self.check(&req).await.map(|()| None),
            Command::Status => self.status().map(|()| None),
            Command::Gc => self.gc(&req).await.map(|()| None),
            Command::Version => Err(CniError::new(
                codes::INVALID_ENV,
                "VERSION is answered by the plugin",
                "",
            )),
        };
        let label = match &res {
            Ok(_) => "ok",
            Err(e) => e.metric_label(),
        };
        let secs = started.elapsed().as_secs_f64();
        self.metrics.observe(req.command.as_str(), label, secs);
        match &res {
            Ok(_) if quiet => debug!(command = %req.command, secs, "done"),
            Ok(_) => info!(command = %req.command, %pod, container = %req.container_id, secs, "done"),
            Err(e) => {
                warn!(command = %req.command, %pod, container = %req.container_id, secs, error = %e, "failed")
            }
        }
        DaemonResponse::from_result(res)
    }

    fn status(&self) -> Result<(), CniError> {
        if self.cache.is_synced() {
            Ok(())
        } else {
            Err(CniError::new(
                codes::PLUGIN_NOT_AVAILABLE,
                "kuryr-daemon has not synced its KuryrPort and Pod caches yet",
                "",
            ))
        }
    }

    async fn add(&self, req: &CniRequest) -> Result<CniResult, CniError> {
        let pod = req.pod.as_ref().ok_or_else(|| {
            CniError::new(
                codes::INVALID_ENV,
                "ADD without K8S_POD_NAMESPACE/K8S_POD_NAME",
                "",
            )
        })?;
        let deadline = tokio::time::Instant::now() + self.cfg.add_timeout;
        let vifs = wait_for_vifs(&self.cache, pod, &req.ifname, Phase::Plug, deadline).await?;
        let mut wired = Attachment {
            pod: pod.key(),
            netns: req.netns.clone(),
            ifnames: Vec::new(),
            host_ifnames: Vec::new(),
        };
        let bound = match self.bind_all(req, &vifs, &mut wired).await {
            Ok(result) => result,
            Err(e) => {
                // Nothing half-plugged: what this ADD made goes, including the interface that failed.
                if let Some((name, _)) = vifs.get(wired.ifnames.len()) {
                    wired.ifnames.push(name.clone());
                }
                self.roll_back(req, &wired).await;
                return Err(e);
            }
        };
        if vifs.iter().any(|(_, v)| !v.active) {
            if let Err(e) = wait_for_vifs(&self.cache, pod, &req.ifname, Phase::Active, deadline).await {
                self.roll_back(req, &wired).await;
                return Err(e);
            }
        }
        self.attachments().insert(req.container_id.clone(), wired);
        Ok(bound)
    }

    async fn roll_back(&self, req: &CniRequest, wired: &Attachment) {
        for name in &wired.ifnames {
            if let Err(u) = self
                .binder
                .unbind(Some(Path::new(&req.netns)), name, &wired.host_ifnames)
                .await
            {
                warn!(error = %u, ifname = %name, "rolling back a failed ADD");
            }
        }
    }

    async fn bind_all(
        &self,
        req: &CniRequest,
        vifs: &[(String, kuryr_api::Vif)],
        wired: &mut Attachment,
    ) -> Result<CniResult, CniError> {
        let mut result = CniResult::default();
        for (i, (ifname, vif)) in vifs.iter().enumerate() {
            let bound = self
                .binder
                .bind(Path::new(&req.netns), ifname, vif, i == 0)
                .await
                .map_err(bind_error)?;
            wired.ifnames.push(bound.ifname.clone());
            wired.host_ifnames.extend(bound.host_ifname.clone());
            result.interfaces.push(IfaceResult {
                name: bound.ifname.clone(),
                mac: bound.mac.clone(),
                sandbox: Some(req.netns.clone()),
                mtu: bound.mtu,
            });
            let idx = result.interfaces.len() - 1;
            for ip in &vif.ips {
                let prefix = ip.cidr.split_once('/').map(|(_, p)| p).unwrap_or("32");
                result.ips.push(IpResult {
                    address: format!("{}/{prefix}", ip.address),
                    gateway: ip.gateway.clone(),
                    interface: Some(idx),
                });
            }
            for (dst, prefix, gw) in crate::binding::route::vif_routes(vif, i == 0).map_err(bind_error)? {
                result.routes.push(RouteResult {
                    dst: format!("{dst}/{prefix}"),
                    gw: Some(gw.to_string()),
                });
            }
        }
        Ok(result)
    }

    /// CNI 1.1 GC: every attachment this daemon wired whose container is not in `cni.dev/valid-attachments`
    /// is unplugged (its interfaces, if their namespace still exists, and its host-side devices). Only
    /// attachments made since the daemon started are known; without a list nothing is collected.
    async fn gc(&self, req: &CniRequest) -> Result<(), CniError> {
        let Some(valid) = &req.config.valid_attachments else {
            return Ok(());
        };
        let stale: Vec<(String, Attachment)> = self
            .attachments()
            .iter()
            .filter(|(id, _)| !valid.iter().any(|v| &v.container_id == *id))
            .map(|(id, a)| (id.clone(), a.clone()))
            .collect();
        for (id, a) in stale {
            info!(container = %id, pod = %a.pod, "GC: unplugging an attachment the runtime no longer has");
            let netns = (!a.netns.is_empty()).then(|| Path::new(&a.netns));
            for (i, name) in a.ifnames.iter().enumerate() {
                let host: &[String] = if i == 0 { &a.host_ifnames } else { &[] };
                self.binder.unbind(netns, name, host).await.map_err(bind_error)?;
            }
            self.attachments().remove(&id);
        }
        Ok(())
    }

    /// Never waits (stale DELs must stay cheap, bd46075a) and succeeds when there is nothing left.
    async fn del(&self, req: &CniRequest) -> Result<(), CniError> {
        let attachment = self.attachments().get(&req.container_id).cloned();
        if attachment.is_none() {
            if let Some(pod) = &req.pod {
                let current = self.attachments().values().any(|a| a.pod == pod.key());
                if current {
                    info!(pod = %pod.key(), container = %req.container_id, "DEL for a stale sandbox: only its own namespace is touched");
                }
            }
        }
        let host_ifnames = attachment.map(|a| a.host_ifnames).unwrap_or_default();
        let netns = (!req.netns.is_empty()).then(|| Path::new(&req.netns));
        self.binder
            .unbind(netns, &req.ifname, &host_ifnames)
            .await
            .map_err(bind_error)?;
        self.attachments().remove(&req.container_id);
        Ok(())
    }

    async fn check(&self, req: &CniRequest) -> Result<(), CniError> {
        let pod = req.pod.as_ref().ok_or_else(|| {
            CniError::new(
                codes::INVALID_ENV,
                "CHECK without K8S_POD_NAMESPACE/K8S_POD_NAME",
                "",
            )
        })?;
        let vifs = match evaluate(pod, &req.ifname, &self.cache.lookup(&pod.namespace, &pod.name)) {
            Verdict::Ready(v) => v,
            Verdict::Abort(e) => return Err(e),
            Verdict::Wait(reason) => {
                return Err(CniError::new(
                    codes::CHECK_FAILED,
                    "the pod's KuryrPort is not ready",
                    reason,
                ))
            }
        };
        for (ifname, vif) in &vifs {
            self.binder
                .check(Path::new(&req.netns), ifname, vif)
                .await
                .map_err(bind_error)?;
        }
        Ok(())
    }
}
