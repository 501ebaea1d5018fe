//! The unix socket server: one task per connection, one request per connection.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, warn};

use super::Daemon;
use crate::binding::Binder;
use crate::protocol::{decode_request, DaemonResponse, MAX_MESSAGE};

/// Binds the socket root-only: its directory 0700, the socket 0600. A leftover socket file is replaced. The
/// directory must be a real directory owned by this user and not writable by everyone (a symlink, another
/// user's directory or a shared one like `/tmp` is refused: whoever controls it could swap the socket).
pub fn bind_socket(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        private_dir(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Refuses a socket directory someone else could control.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("socket directory {}: {why}", dir.display()),
        ))
    };
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return refuse("not a directory (a symlink?)".into());
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return refuse(format!("owned by uid {}, not by this user ({me})", meta.uid()));
    }
    if meta.mode() & 0o002 != 0 {
        return refuse("writable by every user (a shared directory); use a dedicated one".into());
    }
    Ok(())
}

/// Accepts until `shutdown` resolves; requests in flight finish on their own tasks.
pub async fn serve<B: Binder>(
    listener: UnixListener,
    daemon: Arc<Daemon<B>>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let d = daemon.clone();
                    tokio::spawn(async move { serve_one(stream, d).await });
                }
                Err(e) => warn!(error = %e, "accept failed"),
            },
        }
    }
}

async fn serve_one<B: Binder>(stream: UnixStream, daemon: Arc<Daemon<B>>) {
    let (r, mut w) = stream.into_split();
    let mut line = String::new();
    let read = BufReader::new(r.take(MAX_MESSAGE as u64))
        .read_line(&mut line)
        .await;
    let resp = match read {
        Ok(0) => return,
        Ok(_) => match decode_request(&line) {
            Ok(req) => daemon.handle(req).await,
            Err(error) => DaemonResponse::Error { error },
        },
        Err(e) => {
            debug!(error = %e, "reading request failed");
            return;
        }
    };
    let Ok(mut out) = serde_json::to_vec(&resp) else {
        return;
    };
    out.push(b'\n');
    if let Err(e) = w.write_all(&out).await {
        // The plugin gave up (timeout) or was killed; the work is done either way.
        debug!(error = %e, "writing response failed");
    }
}
