//! How every command writes its files: into a temporary file beside the target, renamed into
//! place once complete, so a reader never sees half a file and a failed or killed command
//! leaves what was there before. A file that exists already is replaced only when the caller
//! says so ([`Existing::Replace`]: `--force`, or a file this command owns, such as the reports
//! of the run directory it is resuming).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// What to do when the target of a write exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Fail with [`OutputError::Exists`] and leave the file alone.
    Refuse,
    /// Replace it (atomically).
    Replace,
}

impl Existing {
    /// `--force` replaces; without it an existing file is refused.
    pub fn from_force(force: bool) -> Existing {
        if force {
            Existing::Replace
        } else {
            Existing::Refuse
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{} exists; pass --force to overwrite it", path.display())]
    Exists { path: PathBuf },

    #[error("{} is not empty (it holds {entries}); give a new directory or pass --force", path.display())]
    DirNotEmpty { path: PathBuf, entries: String },

    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OutputError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + use<> {
        let path = path.to_path_buf();
        move |source| OutputError::Io { path, source }
    }
}

/// Fails early (before any expensive work) if `path` exists and may not be replaced.
pub fn refuse_existing(path: &Path, existing: Existing) -> Result<(), OutputError> {
    // symlink_metadata: a dangling symlink is still something the user put there.
    if existing == Existing::Refuse && path.symlink_metadata().is_ok() {
        return Err(OutputError::Exists {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Creates the output directory `dir`. Without `Replace`, a directory that holds anything
/// already is refused, naming a few of its entries.
pub fn prepare_dir(dir: &Path, existing: Existing) -> Result<(), OutputError> {
    if existing == Existing::Refuse && dir.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(OutputError::io(dir))?
            .take(4)
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        if !names.is_empty() {
            names.sort();
            return Err(OutputError::DirNotEmpty {
                path: dir.to_path_buf(),
                entries: names.join(", "),
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(OutputError::io(dir))
}

/// A file being written: a temporary file in the target's directory until [`commit`].
///
/// [`commit`]: AtomicFile::commit
pub struct AtomicFile {
    path: PathBuf,
    existing: Existing,
    out: BufWriter<NamedTempFile>,
}

impl AtomicFile {
    /// Refuses an existing `path` now (unless `Replace`) and opens the temporary file. Its name
    /// ends like `path`'s (e.g. `.png`), for writers that choose the format from the name.
    pub fn create(path: &Path, existing: Existing) -> Result<AtomicFile, OutputError> {
        refuse_existing(path, existing)?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let suffix = path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        let mut builder = tempfile::Builder::new();
        builder.prefix(".gattn-tmp-").suffix(&suffix);
        // A temporary file is private (0600) by default; the output gets the mode any new file
        // gets (0666 less the umask), as with File::create.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let temp = builder.tempfile_in(dir).map_err(OutputError::io(path))?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            existing,
            out: BufWriter::with_capacity(1 << 20, temp),
        })
    }

    /// The file's final name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file's name, for a writer that opens the file itself (a chart renderer).
    pub fn temp_path(&self) -> &Path {
        self.out.get_ref().path()
    }

    /// The temporary file, positioned after what was written through [`Write`].
    pub fn temp_file(&mut self) -> Result<&mut NamedTempFile, OutputError> {
        self.out.flush().map_err(OutputError::io(&self.path))?;
        Ok(self.out.get_mut())
    }

    /// Flushes, syncs and renames the file into place. Without `Replace`, a file that appeared
    /// at `path` meanwhile is not overwritten: the rename fails with [`OutputError::Exists`].
    pub fn commit(self) -> Result<(), OutputError> {
        let io = OutputError::io(&self.path);
        let temp = match self.out.into_inner() {
            Ok(t) => t,
            Err(e) => return Err(io(e.into_error())),
        };
        if let Err(e) = temp.as_file().sync_all() {
            return Err(io(e));
        }
        let persisted = match self.existing {
            Existing::Replace => temp.persist(&self.path),
            Existing::Refuse => temp.persist_noclobber(&self.path),
        };
        match persisted {
            Ok(_) => Ok(()),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(OutputError::Exists { path: self.path })
            }
            Err(e) => Err(io(e.error)),
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.out.write_all(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8], existing: Existing) -> Result<(), OutputError> {
    let mut file = AtomicFile::create(path, existing)?;
    file.write_all(bytes).map_err(OutputError::io(path))?;
    file.commit()
}

/// Lets `render` write the file at the temporary path it is given, then renames it into place.
pub fn write_atomic_with<E>(
    path: &Path,
    existing: Existing,
    render: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<Result<(), E>, OutputError> {
    let file = AtomicFile::create(path, existing)?;
    if let Err(e) = render(file.temp_path()) {
        return Ok(Err(e)); // the temporary file is removed on drop
    }
    file.commit().map(Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_an_existing_file_and_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, b"mine").unwrap();
        let err = write_atomic(&path, b"new", Existing::Refuse).unwrap_err();
        assert!(matches!(err, OutputError::Exists { .. }), "{err}");
        assert!(
            err.to_string().contains("a.txt exists; pass --force"),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"mine");
        write_atomic(&path, b"new", Existing::Replace).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn the_output_has_the_mode_of_a_plainly_created_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (plain, atomic) = (dir.path().join("plain"), dir.path().join("atomic"));
        std::fs::write(&plain, b"x").unwrap();
        write_atomic(&atomic, b"x", Existing::Refuse).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode();
        assert_eq!(mode(&atomic), mode(&plain));
    }

    #[test]
    fn a_file_that_appears_meanwhile_is_not_clobbered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.npy");
        let mut file = AtomicFile::create(&path, Existing::Refuse).unwrap();
        assert!(file.temp_path().to_string_lossy().ends_with(".npy"));
        file.write_all(b"late").unwrap();
        std::fs::write(&path, b"first").unwrap();
        assert!(matches!(file.commit(), Err(OutputError::Exists { .. })));
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
    }

    #[test]
    fn a_failed_render_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.png");
        let rendered = write_atomic_with(&path, Existing::Refuse, |tmp| {
            std::fs::write(tmp, b"half").unwrap();
            Err("no font")
        })
        .unwrap();
        assert_eq!(rendered, Err("no font"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_non_empty_directory_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        prepare_dir(dir.path(), Existing::Refuse).unwrap();
        std::fs::write(dir.path().join("model.safetensors"), b"x").unwrap();
        let err = prepare_dir(dir.path(), Existing::Refuse).unwrap_err();
        assert!(err.to_string().contains("model.safetensors"), "{err}");
        prepare_dir(dir.path(), Existing::Replace).unwrap();
    }
}
