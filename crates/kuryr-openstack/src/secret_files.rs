//! Files holding credentials must not be readable by every user: every clouds.yaml / secure.yaml the OpenStack
//! SDK would read for the chosen cloud (`--clouds-yaml`, `OS_CLIENT_CONFIG_FILE`, `OS_CLIENT_CONFIG_PATH`,
//! `./`, `~/.config/openstack/`, `/etc/openstack/`: [`guard_cloud_files`]), and any other file a binary reads
//! credentials from (kuryr-controller's `--config` and an upstream `kuryr.conf`: [`read_guarded`]). Such a
//! file is refused before anything connects, with the command that fixes it. kuryr-controller and `kuryrctl`
//! both check.

use std::path::Path;

use crate::AuthSource;

/// A credentials file that cannot be read, or that others can read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretFileError {
    #[error("{file}: {reason}")]
    Read { file: String, reason: String },
    #[error(
        "{file} holds credentials ({what}) and is readable by every user (mode {mode:o}): \
         run `chmod o-rwx {file}` (or mount it with mode 0600/0640)"
    )]
    WorldReadable { file: String, what: String, mode: u32 },
}

/// Whether a key names a credential: `password`, `secret`, `token`, `passcode`, or ends in `_password`,
/// `_secret`, `_token` (`application_credential_secret`, `client_secret`, `access_token`, ...).
fn is_secret_key(key: &str) -> bool {
    let k = key.trim().trim_matches(['"', '\'']).to_ascii_lowercase();
    matches!(k.as_str(), "password" | "secret" | "token" | "passcode")
        || ["_password", "_secret", "_token"].iter().any(|s| k.ends_with(s))
}

/// A non-empty scalar.
fn has_value(v: &serde_yaml::Value) -> bool {
    match v {
        serde_yaml::Value::String(s) => !s.trim().is_empty(),
        serde_yaml::Value::Number(_) | serde_yaml::Value::Bool(_) => true,
        _ => false,
    }
}

/// The first credential key of a parsed YAML/JSON document, at any depth.
fn secret_in_yaml(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::Mapping(m) => m.iter().find_map(|(k, v)| {
            let key = k.as_str().unwrap_or_default();
            if is_secret_key(key) && has_value(v) {
                Some(key.to_ascii_lowercase())
            } else {
                secret_in_yaml(v)
            }
        }),
        serde_yaml::Value::Sequence(items) => items.iter().find_map(secret_in_yaml),
        serde_yaml::Value::Tagged(t) => secret_in_yaml(&t.value),
        _ => None,
    }
}

/// The first `key = value` / `key: value` line whose key names a credential (INI files, or YAML the
/// parser refused).
fn secret_in_lines(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(['=', ':'])?;
        let v = v.trim().trim_matches(['"', '\'']);
        (is_secret_key(k) && !v.is_empty()).then(|| k.trim().trim_matches(['"', '\'']).to_ascii_lowercase())
    })
}

/// The credential key `text` holds, if any: YAML and JSON (clouds.yaml, block or flow style, secure.yaml,
/// clouds.json) are parsed, INI (kuryr.conf) is read line by line.
pub fn secret_in(text: &str) -> Option<String> {
    match serde_yaml::from_str::<serde_yaml::Value>(text) {
        Ok(doc @ serde_yaml::Value::Mapping(_)) => secret_in_yaml(&doc),
        _ => secret_in_lines(text),
    }
}

/// Refuses `text` read from `file` with `mode` if it holds a credential and is world-readable.
pub fn check_secrets(file: &str, text: &str, mode: u32) -> Result<(), SecretFileError> {
    if mode & 0o004 == 0 {
        return Ok(());
    }
    match secret_in(text) {
        Some(what) => Err(SecretFileError::WorldReadable {
            file: file.to_owned(),
            what,
            mode: mode & 0o7777,
        }),
        None => Ok(()),
    }
}

/// Reads a file and applies [`check_secrets`] (the mode of the file a symlink points to, as for a
/// Kubernetes Secret volume).
pub fn read_guarded(path: &Path) -> Result<String, SecretFileError> {
    use std::os::unix::fs::PermissionsExt;
    let file = path.display().to_string();
    let err = |e: std::io::Error| SecretFileError::Read {
        file: file.clone(),
        reason: e.to_string(),
    };
    let text = std::fs::read_to_string(path).map_err(err)?;
    let mode = std::fs::metadata(path).map_err(err)?.permissions().mode();
    check_secrets(&file, &text, mode)?;
    Ok(text)
}

/// Checks every file the SDK reads for `source`. A file named but missing is left to the SDK's own error.
pub fn guard_cloud_files(source: &AuthSource) -> Result<(), SecretFileError> {
    for path in source.config_files() {
        match read_guarded(&path) {
            Err(SecretFileError::Read { .. }) if !path.exists() => {}
            other => {
                other?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn credentials_in_a_world_readable_file_are_refused() {
        let text = "[neutron]\nusername = kuryr\npassword = s3cret\n";
        let e = check_secrets("/etc/kuryr/kuryr.conf", text, 0o100644).unwrap_err();
        assert!(e.to_string().contains("readable by every user (mode 644)"), "{e}");
        assert!(e.to_string().contains("chmod o-rwx /etc/kuryr/kuryr.conf"));
        assert!(check_secrets("f", text, 0o100640).is_ok());
        assert!(check_secrets("f", "pod_subnet: x\n", 0o100644).is_ok());
    }

    #[test]
    fn every_clouds_yaml_shape_is_recognised() {
        let cases = [
            ("clouds:\n  c:\n    auth:\n      password: x\n", Some("password")),
            (
                "clouds:\n  c:\n    auth:\n      application_credential_secret: x\n",
                Some("application_credential_secret"),
            ),
            // Flow style, as tests and many generators write it.
            (
                "clouds:\n  c:\n    auth: {auth_url: 'http://k', username: u, password: p}\n",
                Some("password"),
            ),
            (r#"{"clouds": {"c": {"auth": {"token": "t"}}}}"#, Some("token")),
            ("clouds:\n  c:\n    auth:\n      password: ''\n", None),
            (
                "clouds:\n  c:\n    auth_type: token\n    auth: {auth_url: x}\n",
                None,
            ),
            ("[neutron]\nPassword = x\n", Some("password")),
            ("cluster_id: c1\npod_subnet: s\n", None),
        ];
        for (text, want) in cases {
            assert_eq!(secret_in(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn the_cloud_files_of_a_source_are_checked() {
        let dir = std::env::temp_dir().join(format!("kuryr-secfiles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("clouds.yaml");
        std::fs::write(&file, "clouds:\n  c:\n    auth: {password: p}\n").unwrap();
        let src = AuthSource::CloudsYaml {
            file: Some(file.clone()),
            cloud: "c".into(),
        };
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = guard_cloud_files(&src).unwrap_err();
        assert!(
            e.to_string().contains("clouds.yaml holds credentials (password)"),
            "{e}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        guard_cloud_files(&src).unwrap();
        // Missing: the SDK says so itself.
        let gone = AuthSource::CloudsYaml {
            file: Some(PathBuf::from("/nonexistent/clouds.yaml")),
            cloud: "c".into(),
        };
        guard_cloud_files(&gone).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
