//! Where the tokens of `maljan login` are kept: the system's keyring where there is one,
//! else a file only its owner can read, under `$XDG_STATE_HOME/maljan/tokens`.
//!
//! `MALJAN_TOKEN_STORE=file` or `=keyring` chooses instead of trying the keyring first.

use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use maljan_mcp_http::AuthorizationError;
use maljan_mcp_http::oauth::{StoredTokens, TokenStore};
use sha2::{Digest, Sha256};

/// The keyring's service name; each server's entry is named by its URL.
const SERVICE: &str = "maljan";
/// A kept entry is a few hundred bytes; anything larger is not ours.
const MAX_KEPT_BYTES: u64 = 64 * 1024;

/// One server's kept tokens.
pub(crate) enum KeptTokens {
    Keyring(keyring::Entry),
    File(PathBuf),
}

impl fmt::Debug for KeptTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.place())
    }
}

impl KeptTokens {
    /// Where the tokens for the server at `url` are kept on this host.
    pub(crate) fn for_server(url: &str) -> KeptTokens {
        let choice = std::env::var("MALJAN_TOKEN_STORE").unwrap_or_default();
        if choice != "file"
            && let Ok(entry) = keyring::Entry::new(SERVICE, url)
        {
            // Asking is the one way to know whether a keyring answers here (a desktop
            // session) or not (a server without a session bus).
            match entry.get_password() {
                Ok(_) | Err(keyring::Error::NoEntry) => return KeptTokens::Keyring(entry),
                Err(e) if choice == "keyring" => {
                    tracing::warn!("the keyring chosen by MALJAN_TOKEN_STORE does not answer: {e}")
                }
                Err(e) => tracing::debug!("no keyring here ({e}); tokens are kept in a file"),
            }
        }
        KeptTokens::file_for_server(url)
    }

    /// The file the tokens for the server at `url` are kept in when there is no keyring.
    pub(crate) fn file_for_server(url: &str) -> KeptTokens {
        KeptTokens::File(tokens_dir().join(file_name(url)))
    }

    /// Where they are, for a person.
    pub(crate) fn place(&self) -> String {
        match self {
            KeptTokens::Keyring(_) => "the system's keyring".to_owned(),
            KeptTokens::File(path) => path.display().to_string(),
        }
    }

    /// Forgets them: whether there were any.
    pub(crate) fn forget(&self) -> Result<bool, AuthorizationError> {
        match self {
            KeptTokens::Keyring(entry) => match entry.delete_credential() {
                Ok(()) => Ok(true),
                Err(keyring::Error::NoEntry) => Ok(false),
                Err(e) => Err(keyring_error(&e)),
            },
            KeptTokens::File(path) => match std::fs::remove_file(path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(AuthorizationError::new(
                    format!("the token file {} cannot be removed: {e}", path.display()),
                    "remove it by hand",
                )),
            },
        }
    }
}

fn keyring_error(e: &keyring::Error) -> AuthorizationError {
    AuthorizationError::new(
        format!("the system's keyring refused: {e}"),
        "unlock the keyring, or set MALJAN_TOKEN_STORE=file to keep tokens in a file",
    )
}

fn unreadable(path: &Path, why: impl fmt::Display) -> AuthorizationError {
    AuthorizationError::new(
        format!("the token file {} is not used: {why}", path.display()),
        "remove it and run `maljan login` again",
    )
}

impl TokenStore for KeptTokens {
    fn load(&self) -> Result<Option<StoredTokens>, AuthorizationError> {
        let text = match self {
            KeptTokens::Keyring(entry) => match entry.get_password() {
                Ok(text) => text,
                Err(keyring::Error::NoEntry) => return Ok(None),
                Err(e) => return Err(keyring_error(&e)),
            },
            KeptTokens::File(path) => match read_private(path)? {
                Some(text) => text,
                None => return Ok(None),
            },
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            AuthorizationError::new(
                format!("the tokens kept in {} are not readable: {e}", self.place()),
                "run `maljan login` again",
            )
        })
    }

    fn save(&self, tokens: &StoredTokens) -> Result<(), AuthorizationError> {
        let text = serde_json::to_string(tokens)
            .map_err(|e| AuthorizationError::new(e.to_string(), "report this as a bug"))?;
        match self {
            KeptTokens::Keyring(entry) => entry.set_password(&text).map_err(|e| keyring_error(&e)),
            KeptTokens::File(path) => write_private(path, text.as_bytes()).map_err(|e| {
                AuthorizationError::new(
                    format!("the token file {} cannot be written: {e}", path.display()),
                    "make its directory writable by you alone, or set MALJAN_TOKEN_STORE",
                )
            }),
        }
    }
}

/// `$XDG_STATE_HOME/maljan/tokens`.
fn tokens_dir() -> PathBuf {
    crate::ledger_file::state_dir().join("tokens")
}

/// The file of the server at `url`: named by the URL's digest, so that no URL can name a
/// path of its own.
fn file_name(url: &str) -> String {
    let digest = Sha256::digest(url.as_bytes());
    let mut name = String::with_capacity(69);
    for byte in &digest[..16] {
        name.push_str(&format!("{byte:02x}"));
    }
    name.push_str(".json");
    name
}

/// Whether `metadata` belongs to this user and no one else may read or write it.
fn private_to_me(metadata: &std::fs::Metadata) -> Result<(), String> {
    let me = nix::unistd::Uid::effective().as_raw();
    if metadata.uid() != me {
        return Err(format!("it belongs to user {}, not to you", metadata.uid()));
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!("others may reach it (mode {mode:o})"));
    }
    Ok(())
}

/// The text of `path`, when it exists, is a regular file (not a link), is owned by this user
/// and only this user may reach it and the directory holding it.
fn read_private(path: &Path) -> Result<Option<String>, AuthorizationError> {
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(path, e)),
    };
    let metadata = file.metadata().map_err(|e| unreadable(path, e))?;
    if !metadata.is_file() {
        return Err(unreadable(path, "it is not a file"));
    }
    private_to_me(&metadata).map_err(|why| unreadable(path, why))?;
    if let Some(dir) = path.parent() {
        let dir_metadata = std::fs::symlink_metadata(dir).map_err(|e| unreadable(path, e))?;
        private_to_me(&dir_metadata)
            .map_err(|why| unreadable(path, format!("its directory: {why}")))?;
    }
    let mut text = String::new();
    Read::by_ref(&mut file)
        .take(MAX_KEPT_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| unreadable(path, e))?;
    Ok(Some(text))
}

/// Writes `bytes` to `path` whole or not at all, readable by this user alone, in a
/// directory only this user may enter.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the token file has no directory"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let metadata = std::fs::symlink_metadata(dir)?;
    if !metadata.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    private_to_me(&metadata)
        .map_err(|why| std::io::Error::other(format!("{}: {why}", dir.display())))?;
    let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(access: &str) -> StoredTokens {
        serde_json::from_value(serde_json::json!({"access_token": access, "scopes": ["tools"]}))
            .expect("tokens")
    }

    #[test]
    fn a_kept_file_is_owner_only_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let kept = KeptTokens::File(dir.path().join("tokens").join(file_name("https://a/mcp")));
        assert!(kept.load().unwrap().is_none());
        kept.save(&tokens("at-1")).unwrap();
        kept.save(&tokens("at-2")).unwrap();
        let KeptTokens::File(path) = &kept else {
            unreachable!()
        };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(kept.load().unwrap().unwrap().access_token, "at-2");
        assert!(kept.forget().unwrap());
        assert!(!kept.forget().unwrap());
        assert!(kept.load().unwrap().is_none());
    }

    #[test]
    fn a_file_others_may_read_or_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tokens_dir = dir.path().join("tokens");
        let kept = KeptTokens::File(tokens_dir.join("a.json"));
        kept.save(&tokens("at-1")).unwrap();
        std::fs::set_permissions(
            tokens_dir.join("a.json"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let refused = kept.load().unwrap_err();
        assert!(refused.what.contains("mode 644"), "{refused}");

        std::fs::write(dir.path().join("elsewhere"), "{}").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), tokens_dir.join("b.json"))
            .unwrap();
        assert!(KeptTokens::File(tokens_dir.join("b.json")).load().is_err());

        std::fs::set_permissions(&tokens_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let kept = KeptTokens::File(tokens_dir.join("c.json"));
        assert!(
            kept.save(&tokens("at-1")).is_err(),
            "a directory others may enter"
        );
    }

    #[test]
    fn each_url_has_its_own_file_whatever_it_holds() {
        let names = ["https://a/mcp", "https://a/mcp/", "../../etc/passwd", ""].map(file_name);
        for (i, name) in names.iter().enumerate() {
            assert!(name.ends_with(".json") && !name.contains('/'), "{name}");
            assert!(!names[..i].contains(name));
        }
    }
}
