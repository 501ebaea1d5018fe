//! Netlink connections inside a network namespace. setns(2) switches only the calling OS thread, so each
//! connection is opened on a throwaway std::thread that enters the namespace; the socket stays bound to that
//! namespace and its connection task runs on the caller's runtime. Namespaces are never created here
//! (rtnetlink's `NetworkNamespace::add` forks).

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use nix::sched::CloneFlags;
use rtnetlink::Handle;

use super::BindError;

/// An open network namespace (a `/var/run/netns/...` bind mount or `/proc/<pid>/ns/net`).
#[derive(Debug)]
pub struct Netns {
    file: File,
    path: PathBuf,
}

impl Netns {
    pub fn open(path: &Path) -> Result<Self, BindError> {
        let file = File::open(path).map_err(|source| BindError::Netns {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// For IFLA_NET_NS_FD: valid as long as `self` lives.
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// A netlink handle whose socket lives in this namespace.
    pub async fn connect(&self) -> Result<Handle, BindError> {
        let runtime = tokio::runtime::Handle::current();
        self.run(move || {
            // The socket is created (and bound to this namespace) here; the runtime only polls it.
            let _guard = runtime.enter();
            let (conn, handle, _) = rtnetlink::new_connection()?;
            runtime.spawn(conn);
            Ok(handle)
        })
        .await
    }

    /// Runs `f` on a thread inside this namespace (for calls that open their own sockets there).
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> Result<T, BindError> {
        let ns_err = |path: PathBuf| move |source: std::io::Error| BindError::Netns { path, source };
        let file = self.file.try_clone().map_err(ns_err(self.path.clone()))?;
        let path = self.path.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("kuryr-setns".into())
            .spawn(move || {
                let res = nix::sched::setns(&file, CloneFlags::CLONE_NEWNET)
                    .map_err(|e| std::io::Error::from_raw_os_error(e as i32))
                    .and_then(|()| f());
                let _ = tx.send(res);
            })
            .map_err(ns_err(path.clone()))?;
        match rx.await {
            Ok(res) => res.map_err(ns_err(path)),
            Err(_) => Err(BindError::Netns {
                path,
                source: std::io::Error::other("setns thread died"),
            }),
        }
    }
}

/// A netlink handle in the caller's own namespace (the daemon's: the node's).
pub fn connect_current() -> Result<Handle, BindError> {
    let (conn, handle, _) = rtnetlink::new_connection().map_err(|source| BindError::Netns {
        path: PathBuf::from("/proc/self/ns/net"),
        source,
    })?;
    tokio::spawn(conn);
    Ok(handle)
}
