//! `espalier backup FILE`: a consistent copy of a database as a JSON dump (the format of
//! `espalier export`; restore it with `espalier import`).
//!
//! With `--server ADDR` the copy comes from a running server's `GET /v1/backup` (admin), which
//! streams one snapshot while it goes on serving: a served database is locked by the server's
//! process, so only the server can read it. Without `--server` the database at `--db` is
//! opened and exported here. Either way the file is written next to FILE and renamed into
//! place only once complete, so a failed backup leaves no partial file behind.
//!
//! The HTTP exchange is one plain `GET` over TCP, read with HTTP/1.1's chunked transfer
//! coding: a body cut off before its last chunk (the server failed mid-way, or the connection
//! broke) is an error, never a short backup.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{BackupArgs, ExportArgs, Failure, Global};

/// How long the server may stay silent before the backup gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest status line, header line or chunk-size line accepted.
const MAX_LINE: usize = 8 * 1024;

/// Why a backup from a server failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("--server {0:?} is not an address: give HOST:PORT or http://HOST:PORT")]
    BadAddress(String),
    #[error("connecting to {addr}: {source}")]
    Connect { addr: String, source: io::Error },
    #[error("reading from {addr}: {source}")]
    Read { addr: String, source: io::Error },
    #[error("{addr} answered something that is not HTTP/1.1 ({what})")]
    Protocol { addr: String, what: String },
    #[error("{addr} refused the backup ({status}): {message}")]
    Refused { addr: String, status: u16, message: String },
    #[error("the backup from {addr} was cut off after {bytes} bytes (the server failed or the connection broke)")]
    CutOff { addr: String, bytes: u64 },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

pub fn run(g: &Global, args: &BackupArgs) -> Result<(), Failure> {
    match &args.server {
        None => crate::dump::export(g, &ExportArgs { file: Some(args.file.clone()), csv: None, collections: vec![] })
            .map_err(|f| match f {
                Failure::Other(m) if m.contains("lock") || m.contains("serv") => Failure::Other(format!(
                    "{m}\n(to back up a database while a server serves it: espalier backup --server ADDR {})",
                    args.file.display()
                )),
                f => f,
            }),
        Some(server) => {
            let token = args.token.as_deref();
            let (bytes, version) = from_server(server, token, &args.file).map_err(|e| Failure::other(e.to_string()))?;
            if g.json {
                println!(
                    "{}",
                    serde_json::json!({"file": args.file.display().to_string(), "bytes": bytes, "version": version})
                );
            } else {
                let v = version.map(|v| format!(" (version {v})")).unwrap_or_default();
                eprintln!("backed up {bytes} bytes{v} from {server} to {}", args.file.display());
            }
            Ok(())
        }
    }
}

/// `host:port` from `HOST:PORT`, `http://HOST:PORT` or `http://HOST:PORT/`.
fn host_port(server: &str) -> Result<String, BackupError> {
    let rest = server.strip_prefix("http://").unwrap_or(server);
    let rest = rest.trim_end_matches('/');
    let ok = !rest.is_empty()
        && !rest.contains('/')
        && rest.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if ok {
        Ok(rest.to_string())
    } else {
        Err(BackupError::BadAddress(server.to_string()))
    }
}

/// Downloads the server's backup into `file`; the number of bytes and the dump's version.
pub fn from_server(server: &str, token: Option<&str>, file: &Path) -> Result<(u64, Option<u64>), BackupError> {
    let addr = host_port(server)?;
    let connect = |e| BackupError::Connect { addr: addr.clone(), source: e };
    let read = |e| BackupError::Read { addr: addr.clone(), source: e };
    let target =
        addr.to_socket_addrs().map_err(connect)?.next().ok_or_else(|| BackupError::BadAddress(addr.clone()))?;
    let mut stream = TcpStream::connect_timeout(&target, Duration::from_secs(10)).map_err(connect)?;
    stream.set_read_timeout(Some(READ_TIMEOUT)).map_err(connect)?;
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!(
        "GET /v1/backup HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n{auth}Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).map_err(connect)?;
    let mut input = BufReader::with_capacity(1 << 16, stream);

    let status_line = line(&mut input).map_err(read)?;
    let status = parse_status(&status_line)
        .ok_or_else(|| BackupError::Protocol { addr: addr.clone(), what: format!("status line {status_line:?}") })?;
    let mut chunked = false;
    let mut length: Option<u64> = None;
    let mut version = None;
    loop {
        let h = line(&mut input).map_err(read)?;
        if h.is_empty() {
            break;
        }
        let Some((name, value)) = h.split_once(':') else {
            return Err(BackupError::Protocol { addr, what: format!("header {h:?}") });
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "content-length" => length = value.parse().ok(),
            "espalier-version" => version = value.parse().ok(),
            _ => {}
        }
    }
    if status != 200 {
        let mut body = Vec::new();
        let limit = length.unwrap_or(64 * 1024).min(64 * 1024);
        if chunked {
            let _ = read_chunked(&mut input, &mut body, &addr);
        } else {
            let _ = (&mut input).take(limit).read_to_end(&mut body);
        }
        let text = String::from_utf8_lossy(&body);
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_else(|| text.trim().to_string());
        return Err(BackupError::Refused { addr, status, message });
    }

    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let write = |e| BackupError::Write { path: file.to_path_buf(), source: e };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(write)?;
    let bytes = {
        let mut out = io::BufWriter::with_capacity(1 << 16, tmp.as_file_mut());
        let bytes = if chunked {
            read_chunked(&mut input, &mut out, &addr)?
        } else if let Some(n) = length {
            let copied = io::copy(&mut (&mut input).take(n), &mut out).map_err(read)?;
            if copied < n {
                return Err(BackupError::CutOff { addr, bytes: copied });
            }
            copied
        } else {
            return Err(BackupError::Protocol { addr, what: "a body with neither chunks nor a length".into() });
        };
        out.flush().map_err(write)?;
        bytes
    };
    tmp.as_file_mut().sync_all().map_err(write)?;
    tmp.persist(file).map_err(|e| write(e.error))?;
    sync_dir(dir);
    Ok((bytes, version))
}

/// Copies a chunked body to `out`; fails unless it ends with its last (empty) chunk.
fn read_chunked(input: &mut impl BufRead, out: &mut impl Write, addr: &str) -> Result<u64, BackupError> {
    let mut total = 0u64;
    loop {
        let size_line = match line(input) {
            Ok(l) => l,
            Err(e) if is_cut(&e) => return Err(BackupError::CutOff { addr: addr.into(), bytes: total }),
            Err(e) => return Err(BackupError::Read { addr: addr.into(), source: e }),
        };
        let hex = size_line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(hex, 16)
            .map_err(|_| BackupError::Protocol { addr: addr.into(), what: format!("chunk size {size_line:?}") })?;
        if size == 0 {
            return Ok(total);
        }
        let copied = io::copy(&mut input.take(size), out).map_err(|e| {
            if is_cut(&e) {
                BackupError::CutOff { addr: addr.into(), bytes: total }
            } else {
                BackupError::Read { addr: addr.into(), source: e }
            }
        })?;
        total += copied;
        if copied < size {
            return Err(BackupError::CutOff { addr: addr.into(), bytes: total });
        }
        let end = line(input).map_err(|e| {
            if is_cut(&e) {
                BackupError::CutOff { addr: addr.into(), bytes: total }
            } else {
                BackupError::Read { addr: addr.into(), source: e }
            }
        })?;
        if !end.is_empty() {
            return Err(BackupError::Protocol { addr: addr.into(), what: "a chunk longer than its size".into() });
        }
    }
}

fn is_cut(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted)
}

/// One CRLF-terminated line without its terminator; EOF before the terminator is an error.
fn line(input: &mut impl BufRead) -> io::Result<String> {
    let mut buf = Vec::new();
    let n = input.take(MAX_LINE as u64).read_until(b'\n', &mut buf)?;
    if n == 0 || buf.last() != Some(&b'\n') {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the connection ended mid-line"));
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    String::from_utf8(buf).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a line that is not UTF-8"))
}

/// The status code of `HTTP/1.x NNN reason`.
fn parse_status(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Makes the rename durable (best effort: not every platform can open a directory).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(host_port("127.0.0.1:7420").ok().as_deref(), Some("127.0.0.1:7420"));
        assert_eq!(host_port("http://localhost:7420/").ok().as_deref(), Some("localhost:7420"));
        assert!(host_port("localhost").is_err());
        assert!(host_port("http://h:99999").is_err());
        assert!(host_port("h:1/v1").is_err());
    }

    #[test]
    fn chunked_bodies_must_end_with_the_last_chunk() {
        let mut out = Vec::new();
        let whole = b"5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\n\r\n";
        assert_eq!(read_chunked(&mut &whole[..], &mut out, "a").ok(), Some(8));
        assert_eq!(out, b"helloabc");
        for cut in [&b"5\r\nhello\r\n"[..], b"5\r\nhel", b"5\r\nhello\r\n3\r\nab", b""] {
            let mut out = Vec::new();
            assert!(matches!(read_chunked(&mut &cut[..], &mut out, "a"), Err(BackupError::CutOff { .. })), "{cut:?}");
        }
        assert!(matches!(read_chunked(&mut &b"zz\r\n"[..], &mut Vec::new(), "a"), Err(BackupError::Protocol { .. })));
    }

    #[test]
    fn status_lines() {
        assert_eq!(parse_status("HTTP/1.1 200 OK"), Some(200));
        assert_eq!(parse_status("HTTP/1.1 403 Forbidden"), Some(403));
        assert_eq!(parse_status("SSH-2.0"), None);
    }
}
