//! Watching a config file for edits by polling it: no inotify, no extra dependency, and it
//! sees every way a file changes (in-place writes, editors' rename-over, Kubernetes ConfigMap
//! symlink swaps).

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::time::{Interval, MissedTickBehavior, interval};

use crate::config::{LoadError, read_error};

/// Default time between two looks at the config file: 1 s.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// What identifies one version of a file: modification time, length and a hash of the
/// contents (so a touch without an edit, or an edit within one timestamp tick, is told
/// apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// Modification time, when the file system gives one.
    pub modified: Option<SystemTime>,
    /// Length in bytes.
    pub len: u64,
    /// Hash of the contents.
    pub hash: u64,
}

impl Fingerprint {
    /// The fingerprint of `contents` with the file's metadata.
    pub fn of(contents: &[u8], modified: Option<SystemTime>) -> Self {
        let mut hasher = DefaultHasher::new();
        hasher.write(contents);
        Fingerprint {
            modified,
            len: contents.len() as u64,
            hash: hasher.finish(),
        }
    }

    /// Whether the contents differ (the modification time alone does not count).
    pub fn contents_differ(&self, other: &Fingerprint) -> bool {
        self.len != other.len || self.hash != other.hash
    }
}

/// Polls one file every `poll` interval (tokio time) and reports each new version once.
///
/// ```
/// use std::time::Duration;
/// use shepherd_runtime::discovery::FileWatcher;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let dir = std::env::temp_dir().join(format!("shepherd-doc-watch-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("config.yaml");
/// std::fs::write(&path, "endpoints: []\n").unwrap();
///
/// let mut watcher = FileWatcher::new(&path, Duration::from_millis(100));
/// watcher.prime().await; // the version already loaded
/// std::fs::write(&path, "endpoints: [127.0.0.1:8000]\n").unwrap();
/// assert_eq!(watcher.changed().await.unwrap(), "endpoints: [127.0.0.1:8000]\n");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # }
/// ```
#[derive(Debug)]
pub struct FileWatcher {
    path: PathBuf,
    ticker: Interval,
    last: Option<Fingerprint>,
    failing: bool,
}

impl FileWatcher {
    /// A watcher of `path`, looking every `poll` (at least 1 ms).
    pub fn new(path: impl AsRef<Path>, poll: Duration) -> Self {
        let mut ticker = interval(poll.max(Duration::from_millis(1)));
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        FileWatcher {
            path: path.as_ref().to_path_buf(),
            ticker,
            last: None,
            failing: false,
        }
    }

    /// The watched path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the file as it is now as already seen, so that [`changed`](Self::changed) only
    /// reports later edits. Returns its contents when it could be read.
    pub async fn prime(&mut self) -> Option<String> {
        match self.read().await {
            Ok((text, fingerprint)) => {
                self.last = Some(fingerprint);
                Some(text)
            }
            Err(_) => None,
        }
    }

    /// Takes `contents` as the version already seen (the text the config was loaded from),
    /// so that an edit made between loading and watching is still reported.
    pub fn assume(&mut self, contents: &[u8]) {
        self.last = Some(Fingerprint::of(contents, None));
        self.failing = false;
    }

    /// Waits for the next version of the file and returns its contents; or an error, once,
    /// when the file can no longer be read (deleted, unreadable, not UTF-8). After an error
    /// the next readable version is reported even if it equals the last one.
    pub async fn changed(&mut self) -> Result<String, LoadError> {
        loop {
            self.ticker.tick().await;
            match self.read().await {
                Ok((text, fingerprint)) => {
                    let new = self.failing
                        || self
                            .last
                            .is_none_or(|last| last.contents_differ(&fingerprint));
                    self.last = Some(fingerprint);
                    self.failing = false;
                    if new {
                        return Ok(text);
                    }
                }
                Err(error) => {
                    if !self.failing {
                        self.failing = true;
                        return Err(error);
                    }
                }
            }
        }
    }

    async fn read(&self) -> Result<(String, Fingerprint), LoadError> {
        let bytes = tokio::fs::read(&self.path)
            .await
            .map_err(|e| read_error(&self.path, e))?;
        let modified = tokio::fs::metadata(&self.path)
            .await
            .ok()
            .and_then(|m| m.modified().ok());
        let fingerprint = Fingerprint::of(&bytes, modified);
        let text = String::from_utf8(bytes).map_err(|_| LoadError::Read {
            path: self.path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        })?;
        Ok((text, fingerprint))
    }
}
