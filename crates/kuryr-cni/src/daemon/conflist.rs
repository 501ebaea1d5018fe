//! The node's CNI network configuration, written by the daemon itself: only once it serves (socket bound,
//! caches synced), so the runtime never hands an ADD to a plugin whose daemon cannot answer, and removed
//! when it stops, so a node without a daemon reports its network as not ready instead of failing ADDs.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;

/// The conflist's file name: sorts before other configurations a node may carry (the runtime uses the
/// first one).
pub const DEFAULT_NAME: &str = "10-kuryr.conflist";
/// The CNI version the conflist declares (the plugin supports up to 1.1.0: STATUS and GC).
pub const CNI_VERSION: &str = "1.1.0";
/// The network's name in the conflist.
pub const NETWORK_NAME: &str = "kuryr";

/// The conflist that points the plugin at `socket`, as the host sees it, with the plugin's own wait for an
/// answer (`timeout_seconds`; a little over the daemon's ADD timeout).
pub fn render(socket: &Path, timeout_seconds: u64) -> String {
    let v = json!({
        "cniVersion": CNI_VERSION,
        "name": NETWORK_NAME,
        "plugins": [{
            "type": "kuryr-cni",
            "socketPath": socket.display().to_string(),
            "timeoutSeconds": timeout_seconds,
        }],
    });
    // A json! value always serializes.
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// A conflist this daemon wrote; [`Installed::remove`] takes it away again.
#[derive(Debug)]
pub struct Installed {
    path: PathBuf,
}

/// Writes `content` to `dir/name` atomically (a temporary file renamed over it), so the runtime, which
/// watches the directory, never reads half a file.
pub fn install(dir: &Path, name: &str, content: &str) -> std::io::Result<Installed> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    // A dot-file: runtimes only load *.conf, *.conflist and *.json.
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
    }
    if let Err(e) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(Installed { path })
}

impl Installed {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the conflist (already gone is fine: an operator or an uninstall got there first).
    pub fn remove(self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::NetConf;

    #[test]
    fn the_rendered_conflist_is_what_the_plugin_reads() {
        let text = render(Path::new("/run/kuryr/node-a/cni.sock"), 75);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["cniVersion"], CNI_VERSION);
        assert_eq!(v["name"], NETWORK_NAME);
        // The runtime hands the plugin its entry with the list's name and version added.
        let mut entry = v["plugins"][0].clone();
        entry["name"] = v["name"].clone();
        entry["cniVersion"] = v["cniVersion"].clone();
        let conf = NetConf::parse(entry.to_string().as_bytes()).unwrap();
        assert_eq!(conf.plugin_type, "kuryr-cni");
        assert_eq!(conf.socket_path.as_deref(), Some("/run/kuryr/node-a/cni.sock"));
        assert_eq!(conf.timeout_seconds, Some(75));
    }

    #[test]
    fn install_writes_the_file_whole_and_remove_takes_it_away() {
        let dir = std::env::temp_dir().join(format!("kuryr-conflist-{}", fastrand::u64(..)));
        let installed = install(&dir, DEFAULT_NAME, "{}\n").unwrap();
        assert_eq!(installed.path(), dir.join(DEFAULT_NAME));
        assert_eq!(std::fs::read_to_string(dir.join(DEFAULT_NAME)).unwrap(), "{}\n");
        // No temporary file left beside it.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // Rewriting replaces the content.
        let installed = install(&dir, DEFAULT_NAME, "{\"a\":1}\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(DEFAULT_NAME)).unwrap(),
            "{\"a\":1}\n"
        );
        installed.remove().unwrap();
        assert!(!dir.join(DEFAULT_NAME).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn removing_a_conflist_someone_else_removed_is_fine() {
        let dir = std::env::temp_dir().join(format!("kuryr-conflist-{}", fastrand::u64(..)));
        let installed = install(&dir, DEFAULT_NAME, "{}\n").unwrap();
        std::fs::remove_file(dir.join(DEFAULT_NAME)).unwrap();
        installed.remove().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
