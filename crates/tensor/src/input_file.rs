//! The one way this engine reads an input file: only a regular file (not a directory, FIFO,
//! socket or device such as /dev/zero, where a read blocks or never ends), and at most a size
//! limit that fits its use, checked before any byte is read. The errors are `std::io::Error`s
//! whose message says why, so that every caller keeps its own error naming the file.

use std::fs::{File, OpenOptions};
use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// Opens `path` for reading if it is a regular file of at most `limit` bytes; returns the file
/// and its length. A FIFO is opened without blocking (and then refused), so nothing hangs.
pub fn open_regular(path: &Path, limit: u64) -> std::io::Result<(File, u64)> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading blocks until a writer appears; O_NONBLOCK returns at once
        // (and changes nothing for a regular file, which is all that is read after the check).
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let metadata = file.metadata()?;
    let kind = metadata.file_type();
    if !kind.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, not_regular(&kind)));
    }
    let len = metadata.len();
    if len > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("the file is {len} bytes, more than the {limit} bytes allowed here"),
        ));
    }
    Ok((file, len))
}

/// The bytes of a regular file of at most `limit` bytes (see [`open_regular`]).
pub fn read_regular(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let (file, len) = open_regular(path, limit)?;
    let mut bytes = Vec::with_capacity(len as usize);
    // `take` guards against a file that grows between the check and the read.
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The UTF-8 text of a regular file of at most `limit` bytes (see [`open_regular`]).
pub fn read_regular_to_string(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_regular(path, limit)?).map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

fn not_regular(kind: &std::fs::FileType) -> String {
    let what = if kind.is_dir() {
        "a directory"
    } else {
        special_kind(kind)
    };
    format!("it is {what}, not a regular file: only regular files are read")
}

#[cfg(unix)]
fn special_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &std::fs::FileType) -> &'static str {
    "a special file"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_and_a_device_are_refused_by_kind() {
        let dir = std::env::temp_dir();
        let e = read_regular(&dir, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        #[cfg(unix)]
        {
            let e = read_regular(Path::new("/dev/zero"), 1 << 20).unwrap_err();
            assert!(e.to_string().contains("character device"), "{e}");
        }
    }

    #[test]
    fn a_file_over_the_limit_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ten.txt");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular(&path, 10).unwrap(), b"0123456789");
        let e = read_regular(&path, 9).unwrap_err();
        assert!(e.to_string().contains("10 bytes, more than the 9"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let e = read_regular(&fifo, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
}
