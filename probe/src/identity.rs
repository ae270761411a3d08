//! What identifies a submission without identifying a person: a random id per install (kept in
//! the user's config directory) and a salted hash of the GPU's UUID. The raw UUID, the host name
//! and the user name never leave the machine.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// Where the install id lives on this machine.
pub fn id_file() -> Option<PathBuf> {
    id_file_for(std::env::consts::OS, |k| std::env::var_os(k))
}

/// The rule of [`id_file`] for an OS (`std::env::consts::OS`) and its environment, testable
/// anywhere: Windows `%APPDATA%\headroom\install-id`; macOS `~/Library/Application
/// Support/headroom/install-id`; elsewhere `$XDG_CONFIG_HOME/headroom/install-id`, else
/// `~/.config/headroom/install-id`. Relative or empty values are ignored (as the XDG
/// specification says), so the id never lands in whatever directory the probe runs from.
pub fn id_file_for(os: &str, env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let abs = |k: &str| env(k).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = match os {
        "windows" => abs("APPDATA").or_else(|| abs("USERPROFILE").map(|h| h.join("AppData").join("Roaming")))?,
        "macos" => abs("HOME")?.join("Library").join("Application Support"),
        _ => abs("XDG_CONFIG_HOME").or_else(|| abs("HOME").map(|h| h.join(".config")))?,
    };
    Some(base.join("headroom").join("install-id"))
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness at all: time and process id, hashed (a weaker id, still random enough
        // to tell installs apart).
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        bytes.copy_from_slice(&Sha256::digest(seed.as_bytes())[..16]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The install id: read from its file, or created there (a fresh one each run if the file can't
/// be written).
pub fn install_id() -> String {
    if let Some(path) = id_file() {
        if let Ok(id) = std::fs::read_to_string(&path) {
            let id = id.trim().to_string();
            if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return id;
            }
        }
        let id = random_hex();
        if path.parent().is_some_and(|p| std::fs::create_dir_all(p).is_ok()) {
            let _ = std::fs::write(&path, format!("{id}\n"));
        }
        return id;
    }
    random_hex()
}

/// SHA-256 of the GPU UUID salted with the install id, hex: the same card gives the same hash for
/// one install, and nothing links it back to the UUID.
pub fn uuid_hash(install_id: &str, uuid: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(b"headroom-gpu-uuid\0");
    h.update(install_id.as_bytes());
    h.update(uuid);
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_file_is_in_each_os_s_own_config_directory() {
        use std::ffi::OsString;
        let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(v));
        // Windows paths are only absolute on Windows; elsewhere the same rule is shown with Unix
        // paths standing in for them.
        let win = if cfg!(windows) { r"C:\Users\Ana Maria\AppData\Roaming" } else { "/c/Users/Ana Maria/AppData/Roaming" };
        let win_env: &'static [(&'static str, &'static str)] = Box::leak(vec![("APPDATA", win), ("HOME", "/ignored")].into_boxed_slice());
        assert_eq!(id_file_for("windows", env(win_env)), Some(PathBuf::from(win).join("headroom").join("install-id")));
        assert_eq!(id_file_for("windows", env(&[])), None);
        assert_eq!(id_file_for("macos", env(&[("HOME", "/Users/ana")])), Some(PathBuf::from("/Users/ana/Library/Application Support/headroom/install-id")));
        assert_eq!(id_file_for("linux", env(&[("HOME", "/home/ana")])), Some(PathBuf::from("/home/ana/.config/headroom/install-id")));
        assert_eq!(id_file_for("linux", env(&[("HOME", "/home/ana"), ("XDG_CONFIG_HOME", "/cfg")])), Some(PathBuf::from("/cfg/headroom/install-id")));
        // A relative XDG_CONFIG_HOME is ignored (XDG base directory specification).
        assert_eq!(
            id_file_for("linux", env(&[("HOME", "/home/ana"), ("XDG_CONFIG_HOME", "relative")])),
            Some(PathBuf::from("/home/ana/.config/headroom/install-id"))
        );
        assert_eq!(id_file_for("linux", env(&[("HOME", "")])), None);
    }

    #[test]
    fn random_ids_differ() {
        let (a, b) = (random_hex(), random_hex());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn the_hash_depends_on_the_salt_and_hides_the_uuid() {
        let uuid = [0xabu8; 16];
        let a = uuid_hash("00112233445566778899aabbccddeeff", &uuid);
        assert_eq!(a, uuid_hash("00112233445566778899aabbccddeeff", &uuid));
        assert_ne!(a, uuid_hash("ffeeddccbbaa99887766554433221100", &uuid));
        assert_eq!(a.len(), 32);
        assert!(!a.contains("abab"), "no raw UUID bytes in the hash");
    }

    #[test]
    fn the_install_id_is_created_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("headroom-probe-id-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // SAFETY: this test is the only one touching XDG_CONFIG_HOME.
        unsafe { std::env::set_var("XDG_CONFIG_HOME", &dir) };
        let first = install_id();
        assert_eq!(first.len(), 32);
        assert_eq!(install_id(), first);
        assert_eq!(std::fs::read_to_string(dir.join("headroom/install-id")).unwrap().trim(), first);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
