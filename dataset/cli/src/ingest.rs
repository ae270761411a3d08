//! Small pieces of the ingest service that are not HTTP: submission ids, the clock, the content
//! hash, the per-client rate limiter and connection counter, and who the client is behind a
//! trusted reverse proxy.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// A random, URL-safe submission id: 128 bits from the OS generator, base64url without padding
/// (22 characters). Not sequential, so ids reveal neither the count nor each other.
/// The first character is a letter or digit, so that an id never looks like a command-line flag
/// (`dataset review --accept ID`).
pub fn new_id() -> Result<String, String> {
    loop {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| format!("no randomness from the OS: {e}"))?;
        let id = base64url(&bytes);
        if id.as_bytes()[0].is_ascii_alphanumeric() {
            return Ok(id);
        }
    }
}

/// Whether `s` looks like an id `new_id` makes (checked before any database lookup).
pub fn is_id(s: &str) -> bool {
    s.len() == 22 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 2);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (*b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// SHA-256 of the canonical document, lowercase hex.
pub fn content_hash(canonical: &str) -> String {
    Sha256::digest(canonical.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Now, as RFC 3339 UTC with milliseconds (`2026-11-30T09:14:41.123Z`).
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// Seconds until the next UTC midnight (at least 1): when a per-day cap opens again.
pub fn seconds_to_utc_midnight() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    (86_400 - now % 86_400).max(1)
}

fn rfc3339(since_epoch: Duration) -> String {
    let secs = since_epoch.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, since_epoch.subsec_millis())
}

/// Token buckets per client: `per_minute` tokens a minute, at most `burst` saved up. IPv6 clients
/// are keyed by their /64 (one subscriber's prefix), IPv4-mapped addresses as IPv4.
/// `per_minute == 0` turns limiting off.
pub struct RateLimiter {
    per_minute: u32,
    burst: u32,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

/// Buckets kept before idle (full) ones are dropped.
const MAX_TRACKED: usize = 100_000;

impl RateLimiter {
    pub fn new(per_minute: u32, burst: u32) -> RateLimiter {
        RateLimiter { per_minute, burst: burst.max(1), buckets: Mutex::new(HashMap::new()) }
    }

    pub fn enabled(&self) -> bool {
        self.per_minute > 0
    }

    fn key(ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let s = v6.segments();
                    IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
                }
            },
            v4 => v4,
        }
    }

    /// Takes a token for `ip`; Err(seconds until one is available) when there is none.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        if !self.enabled() {
            return Ok(());
        }
        let rate = self.per_minute as f64 / 60.0;
        let burst = self.burst as f64;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_TRACKED {
            buckets.retain(|_, (tokens, at)| *tokens + now.saturating_duration_since(*at).as_secs_f64() * rate < burst);
        }
        let (tokens, at) = buckets.entry(Self::key(ip)).or_insert((burst, now));
        *tokens = (*tokens + now.saturating_duration_since(*at).as_secs_f64() * rate).min(burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}

/// HMAC-SHA256 (RFC 2104) of `msg` under `key`.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.map(|x| x ^ b);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(msg).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

/// An address as IPv4 when it is an IPv4-mapped IPv6 address.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// The block of `ip` as a string: its first `octets` IPv4 octets (`203.0.113.0/24`) or its first
/// `segments` IPv6 segments (`2001:db8:abcd::/48`). The tags are keyed hashes of these strings, so
/// their form never changes.
fn block_of(ip: IpAddr, octets: usize, segments: usize) -> String {
    match unmapped(ip) {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            let kept: Vec<String> = (0..4).map(|i| if i < octets { o[i].to_string() } else { "0".to_string() }).collect();
            format!("{}/{}", kept.join("."), 8 * octets)
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let kept: Vec<String> = s[..segments].iter().map(|x| format!("{x:x}")).collect();
            format!("{}::/{}", kept.join(":"), 16 * segments)
        }
    }
}

/// The network a client address belongs to, as independence is judged: IPv4 /24, IPv6 /48
/// (IPv4-mapped IPv6 addresses as IPv4).
pub fn network_prefix(ip: IpAddr) -> String {
    block_of(ip, 3, 3)
}

/// The coarser block around a client's network, as submitters are capped per day: IPv4 /16, IPv6
/// /32 (IPv4-mapped addresses as IPv4).
pub fn network_block(ip: IpAddr) -> String {
    block_of(ip, 2, 2)
}

/// Opaque, keyed tags of where a submission came from (its network prefix, its user agent):
/// stored privately with the submission, never published. Without the server secret a tag cannot
/// be tied back to an address, nor made up for one.
pub struct Tagger {
    secret: Vec<u8>,
}

impl Tagger {
    pub fn new(secret: Vec<u8>) -> Tagger {
        Tagger { secret }
    }

    fn tag(&self, kind: &str, value: &str) -> String {
        let mac = hmac_sha256(&self.secret, format!("{kind}\0{value}").as_bytes());
        mac[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn prefix_tag(&self, ip: IpAddr) -> String {
        self.tag("prefix", &network_prefix(ip))
    }

    pub fn block_tag(&self, ip: IpAddr) -> String {
        self.tag("block", &network_block(ip))
    }

    pub fn agent_tag(&self, user_agent: &str) -> String {
        self.tag("agent", user_agent)
    }
}

/// How to make a secret by hand (32 random bytes as hex, readable by its owner only); the hosted
/// deployment's recipe in dataset/README.md writes this command, and a test runs it as written.
pub const SECRET_COMMAND: &str = "(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > FILE)";

/// A warning when the secret file can be read by others than its owner (anyone who reads it can
/// tie the private network tags back to addresses, or make tags up).
pub fn secret_file_warning(path: &std::path::Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            return Some(format!(
                "warning: {} can be read by other users (mode {:o}); anyone who reads it can link network tags to addresses: chmod 600 it",
                path.display(),
                mode & 0o777
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    None
}

/// The server secret in `path` (hex, at least 16 bytes), created with 32 random bytes (readable by
/// its owner only) when the file does not exist.
pub fn load_or_create_secret(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let parse = |text: &str| -> Result<Vec<u8>, String> {
        let t = text.trim();
        let bytes: Option<Vec<u8>> =
            (t.len() % 2 == 0).then(|| (0..t.len()).step_by(2).map(|i| u8::from_str_radix(t.get(i..i + 2)?, 16).ok()).collect()).flatten();
        match bytes {
            Some(b) if b.len() >= 16 => Ok(b),
            _ => Err(format!("{}: the server secret must be at least 32 hex digits (make one: {SECRET_COMMAND})", path.display())),
        }
    };
    match std::fs::read(path) {
        // Raw random bytes are no hex text: the same message, never "not valid UTF-8".
        Ok(bytes) => parse(std::str::from_utf8(&bytes).unwrap_or("-")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut b = [0u8; 32];
            getrandom::fill(&mut b).map_err(|e| format!("no randomness from the OS: {e}"))?;
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            use std::io::Write;
            let mut f = options.open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            f.write_all(format!("{hex}\n").as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(b.to_vec())
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// An address block (`10.0.0.0/8`, `::1/128`, or one address): the trusted proxies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    pub fn parse(s: &str) -> Result<IpNet, String> {
        let bad = || format!("`{s}` is not an IP address or block (examples: 127.0.0.1, 10.0.0.0/8, ::1)");
        let (a, p) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
            None => max,
        };
        Ok(IpNet { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - self.prefix) };
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - self.prefix) };
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// The one forwarding header the trusted proxies write (`--forwarded-header`). Only that header is
/// read: a proxy passes the others through as the client wrote them (nginx, told to set
/// `X-Forwarded-For`, forwards a client's own `Forwarded` untouched).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, …` (what nginx's `$proxy_add_x_forwarded_for` writes).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client;proto=https, for=proxy1`.
    Forwarded,
}

impl ForwardedHeader {
    pub fn parse(s: &str) -> Result<ForwardedHeader, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(ForwardedHeader::XForwardedFor),
            "forwarded" => Ok(ForwardedHeader::Forwarded),
            _ => Err(format!("`{s}`: the forwarding header is `x-forwarded-for` or `forwarded`")),
        }
    }

    /// The header's name, lowercase.
    pub fn name(self) -> &'static str {
        match self {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => "forwarded",
        }
    }

    /// The addresses the header lists, left to right (unreadable entries left out).
    fn chain(self, value: &str) -> Vec<IpAddr> {
        match self {
            ForwardedHeader::XForwardedFor => value.split(',').filter_map(|a| parse_node(a.trim())).collect(),
            ForwardedHeader::Forwarded => value
                .split(',')
                .filter_map(|element| {
                    element.split(';').find_map(|pair| {
                        let (k, v) = pair.trim().split_once('=')?;
                        k.trim().eq_ignore_ascii_case("for").then(|| parse_node(v.trim().trim_matches('"')))?
                    })
                })
                .collect(),
        }
    }
}

/// The client a request comes from. From a trusted proxy, the address in the configured forwarding
/// header (`value`): the last address that is not itself a trusted proxy, read from the right,
/// since each proxy appends the address it saw and anything to the left of that was written by the
/// client. From anyone else, the peer: their headers are ignored.
pub fn client_addr(peer: IpAddr, trusted: &[IpNet], header: ForwardedHeader, value: Option<&str>) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let chain = value.map(|v| header.chain(v)).unwrap_or_default();
    chain.into_iter().rev().find(|ip| !is_trusted(*ip)).unwrap_or(peer)
}

/// An address as forwarding headers write it: `1.2.3.4`, `1.2.3.4:80`, `[::1]`, `[::1]:80`, `::1`.
fn parse_node(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse() {
        return Some(ip);
    }
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    s.rsplit_once(':').and_then(|(a, _)| a.parse::<std::net::Ipv4Addr>().ok()).map(IpAddr::V4)
}

/// The network a connection is counted against: IPv4 /24, IPv6 /64 (one subscriber's prefix),
/// IPv4-mapped addresses as IPv4. Many addresses of one network are one client for the cap.
pub fn connection_network(ip: IpAddr) -> IpAddr {
    match unmapped(ip) {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        IpAddr::V4(v4) => {
            let o = v4.octets();
            IpAddr::V4(std::net::Ipv4Addr::new(o[0], o[1], o[2], 0))
        }
    }
}

/// Connections held per network ([`connection_network`]), with two limits: one network holds at
/// most `cap`, and once `shared` connections are held in all, the rest (the reserve) go only to
/// networks holding fewer than `reserve_share`. However many networks an attacker spreads over,
/// the reserve keeps slots for everyone else (a health check, a new visitor).
pub struct ConnectionCounter {
    cap: usize,
    shared: usize,
    reserve_share: usize,
    held: Mutex<(HashMap<IpAddr, usize>, usize)>,
}

/// One held connection; counted until dropped.
pub struct ConnectionSlot {
    counter: std::sync::Arc<ConnectionCounter>,
    network: IpAddr,
}

impl ConnectionCounter {
    pub fn new(cap: usize, shared: usize, reserve_share: usize) -> std::sync::Arc<ConnectionCounter> {
        std::sync::Arc::new(ConnectionCounter { cap: cap.max(1), shared, reserve_share: reserve_share.max(1), held: Mutex::new((HashMap::new(), 0)) })
    }

    /// A slot for one more connection from `ip`, or None when its network holds its cap, or when
    /// the shared slots are taken and its network already holds its share of the reserve.
    pub fn acquire(self: &std::sync::Arc<Self>, ip: IpAddr) -> Option<ConnectionSlot> {
        let network = connection_network(ip);
        let mut guard = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let (held, total) = &mut *guard;
        let n = held.get(&network).copied().unwrap_or(0);
        if n >= self.cap || (*total >= self.shared && n >= self.reserve_share) {
            return None;
        }
        held.insert(network, n + 1);
        *total += 1;
        Some(ConnectionSlot { counter: self.clone(), network })
    }

    #[cfg(test)]
    pub fn held(&self, ip: IpAddr) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).0.get(&connection_network(ip)).copied().unwrap_or(0)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut guard = self.counter.held.lock().unwrap_or_else(|e| e.into_inner());
        let (held, total) = &mut *guard;
        *total = total.saturating_sub(1);
        if let Some(n) = held.get_mut(&self.network) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.network);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_url_safe_and_recognised() {
        let a = new_id().unwrap();
        let b = new_id().unwrap();
        assert_ne!(a, b);
        assert!(is_id(&a) && is_id(&b), "{a} {b}");
        for _ in 0..2000 {
            assert!(new_id().unwrap().as_bytes()[0].is_ascii_alphanumeric());
        }
        assert!(!is_id("1") && !is_id("../../etc/passwd") && !is_id(&format!("{a}x")));
        assert_eq!(base64url(&[0xff; 3]), "____");
        assert_eq!(base64url(b"hi"), "aGk");
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(Duration::from_millis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(Duration::from_millis(1_796_030_081_123)), "2026-11-30T09:14:41.123Z");
        assert_eq!(rfc3339(Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn content_hash_is_sha256_hex() {
        assert_eq!(content_hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let limiter = RateLimiter::new(30, 3);
        let ip: IpAddr = "203.0.113.7".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.check(ip, t0), Ok(()));
        }
        // 30 a minute: one token every 2 s.
        assert_eq!(limiter.check(ip, t0), Err(2));
        assert_eq!(limiter.check(ip, t0 + Duration::from_millis(1500)), Err(1));
        assert_eq!(limiter.check(ip, t0 + Duration::from_millis(2100)), Ok(()));
        // Another client has its own bucket.
        assert_eq!(limiter.check("198.51.100.1".parse().unwrap(), t0), Ok(()));
    }

    #[test]
    fn ipv6_clients_share_a_bucket_per_64_and_zero_disables() {
        let limiter = RateLimiter::new(1, 1);
        let t0 = Instant::now();
        assert_eq!(limiter.check("2001:db8:1:2::1".parse().unwrap(), t0), Ok(()));
        assert!(limiter.check("2001:db8:1:2::ffff".parse().unwrap(), t0).is_err());
        assert_eq!(limiter.check("2001:db8:1:3::1".parse().unwrap(), t0), Ok(()));
        assert_eq!(limiter.check("::ffff:192.0.2.1".parse().unwrap(), t0), Ok(()));
        assert!(limiter.check("192.0.2.1".parse().unwrap(), t0).is_err());
        let off = RateLimiter::new(0, 0);
        for _ in 0..1000 {
            assert_eq!(off.check("192.0.2.1".parse().unwrap(), t0), Ok(()));
        }
    }

    #[test]
    fn forwarded_clients_are_believed_only_from_trusted_proxies() {
        use ForwardedHeader::{Forwarded, XForwardedFor};
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let trusted = [IpNet::parse("10.0.0.0/24").unwrap()];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // From the proxy: the last address it appended.
        assert_eq!(client_addr(proxy, &trusted, XForwardedFor, Some("203.0.113.9")), ip("203.0.113.9"));
        assert_eq!(client_addr(proxy, &trusted, XForwardedFor, Some("1.1.1.1, 203.0.113.9")), ip("203.0.113.9"));
        // A chain of trusted proxies is skipped from the right.
        assert_eq!(client_addr(proxy, &trusted, XForwardedFor, Some("1.1.1.1, 203.0.113.9, 10.0.0.7")), ip("203.0.113.9"));
        // RFC 7239 when that is the configured header, with ports and IPv6 brackets.
        assert_eq!(client_addr(proxy, &trusted, Forwarded, Some(r#"for="[2001:db8::1]:4711";proto=https"#)), ip("2001:db8::1"));
        assert_eq!(client_addr(proxy, &trusted, Forwarded, Some("for=192.0.2.60:80, for=10.0.0.9")), ip("192.0.2.60"));
        // Nothing usable: the proxy itself.
        assert_eq!(client_addr(proxy, &trusted, XForwardedFor, Some("unknown, garbage")), proxy);
        assert_eq!(client_addr(proxy, &trusted, XForwardedFor, None), proxy);
        // From anyone else the headers are ignored.
        let other = ip("198.51.100.1");
        assert_eq!(client_addr(other, &trusted, XForwardedFor, Some("1.2.3.4")), other);
        assert_eq!(client_addr(proxy, &[], XForwardedFor, Some("1.2.3.4")), proxy);
        assert_eq!(ForwardedHeader::parse("X-Forwarded-For"), Ok(XForwardedFor));
        assert!(ForwardedHeader::parse("x-real-ip").is_err());
    }

    /// Issue 40 point 1: nginx sets X-Forwarded-For and passes the client's own `Forwarded`
    /// through. Only the configured header is read, so the client's `Forwarded` names nobody.
    #[test]
    fn a_client_written_forwarded_header_is_not_believed_behind_an_x_forwarded_for_proxy() {
        let proxy: IpAddr = "127.0.0.1".parse().unwrap();
        let trusted = [IpNet::parse("127.0.0.1").unwrap()];
        let request = [("forwarded", "for=9.9.9.9"), ("x-forwarded-for", "9.9.9.9, 198.51.100.7")];
        let configured = ForwardedHeader::XForwardedFor;
        let value = request.iter().find(|(name, _)| *name == configured.name()).map(|(_, v)| *v);
        assert_eq!(client_addr(proxy, &trusted, configured, value), "198.51.100.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn ip_blocks_parse_and_match() {
        let n = IpNet::parse("192.168.1.0/24").unwrap();
        assert!(n.contains("192.168.1.77".parse().unwrap()));
        assert!(!n.contains("192.168.2.1".parse().unwrap()));
        assert!(n.contains("::ffff:192.168.1.3".parse().unwrap()), "IPv4-mapped IPv6 peers match IPv4 blocks");
        assert!(IpNet::parse("::1").unwrap().contains("::1".parse().unwrap()));
        assert!(IpNet::parse("0.0.0.0/0").unwrap().contains("8.8.8.8".parse().unwrap()));
        for bad in ["", "1.2.3", "10.0.0.0/33", "::1/129", "example.com", "10.0.0.0/x"] {
            assert!(IpNet::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_network_holds_at_most_its_cap_of_connections() {
        let c = ConnectionCounter::new(2, 100, 2);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let s1 = c.acquire(ip("127.0.0.2")).unwrap();
        // Another address of the same /24 shares the cap.
        let _s2 = c.acquire(ip("127.0.0.3")).unwrap();
        assert!(c.acquire(ip("127.0.0.4")).is_none());
        assert!(c.acquire(ip("127.0.1.2")).is_some(), "another network is not affected");
        // IPv6: one /64 is one network.
        let _v6 = (c.acquire(ip("2001:db8:1:2::1")).unwrap(), c.acquire(ip("2001:db8:1:2::ffff")).unwrap());
        assert!(c.acquire(ip("2001:db8:1:2:abcd::1")).is_none());
        assert!(c.acquire(ip("2001:db8:1:3::1")).is_some());
        drop(s1);
        assert_eq!(c.held(ip("127.0.0.9")), 1);
        assert!(c.acquire(ip("127.0.0.2")).is_some());
    }

    #[test]
    fn many_networks_cannot_take_the_reserve() {
        // 10 shared slots, then one more connection per network that holds fewer than 2.
        let c = ConnectionCounter::new(64, 10, 2);
        let attempts = (0..3).flat_map(|n| (0..4).map(move |h| format!("10.0.{n}.{h}")));
        let attacker: Vec<ConnectionSlot> = attempts.filter_map(|a| c.acquire(a.parse().unwrap())).collect();
        // The shared slots filled at 10 (4 + 4 + 2); each attacking network then held 2 or more.
        assert_eq!(attacker.len(), 10, "only the shared slots");
        for a in ["10.0.0.99", "10.0.2.99"] {
            assert!(c.acquire(a.parse().unwrap()).is_none(), "{a}: a network holding its share gets no reserve slot");
        }
        let health = c.acquire("192.0.2.1".parse().unwrap());
        assert!(health.is_some(), "a new network gets a reserve slot");
        let second = c.acquire("192.0.2.2".parse().unwrap());
        assert!(second.is_some());
        assert!(c.acquire("192.0.2.3".parse().unwrap()).is_none(), "at most its share of the reserve");
        drop(attacker);
        assert!(c.acquire("10.0.0.1".parse().unwrap()).is_some());
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231 test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block.
        let mac = hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn prefixes_group_a_network_and_tags_need_the_secret() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(network_prefix(ip("203.0.113.77")), "203.0.113.0/24");
        assert_eq!(network_prefix(ip("::ffff:203.0.113.9")), "203.0.113.0/24");
        assert_eq!(network_prefix(ip("2001:db8:abcd:12::1")), "2001:db8:abcd::/48");
        let t = Tagger::new(vec![1; 32]);
        assert_eq!(t.prefix_tag(ip("203.0.113.1")), t.prefix_tag(ip("203.0.113.200")));
        assert_ne!(t.prefix_tag(ip("203.0.113.1")), t.prefix_tag(ip("203.0.114.1")));
        assert_ne!(t.prefix_tag(ip("203.0.113.1")), Tagger::new(vec![2; 32]).prefix_tag(ip("203.0.113.1")));
        assert_eq!(t.prefix_tag(ip("203.0.113.1")).len(), 16);
        assert_ne!(t.agent_tag("probe/0.1"), t.prefix_tag(ip("203.0.113.1")));
        assert_eq!(network_block(ip("203.0.113.77")), "203.0.0.0/16");
        assert_eq!(network_block(ip("2001:db8:abcd:12::1")), "2001:db8::/32");
        assert_eq!(t.block_tag(ip("203.0.1.1")), t.block_tag(ip("203.0.200.9")));
        assert_ne!(t.block_tag(ip("203.0.1.1")), t.block_tag(ip("203.1.1.1")));
        assert_ne!(t.block_tag(ip("203.0.1.1")), t.prefix_tag(ip("203.0.1.1")));
    }

    #[test]
    fn the_secret_is_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("headroom-secret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("server.secret");
        let a = load_or_create_secret(&path).unwrap();
        assert_eq!(a.len(), 32);
        assert_eq!(load_or_create_secret(&path).unwrap(), a);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        std::fs::write(&path, "abc").unwrap();
        assert!(load_or_create_secret(&path).unwrap_err().contains("32 hex digits"));
        // Raw random bytes (what `head -c 32 /dev/urandom > FILE` writes) get the same message.
        std::fs::write(&path, [0xffu8, 0xfe, 0x00, 0x80, 0x12]).unwrap();
        let e = load_or_create_secret(&path).unwrap_err();
        assert!(e.contains("32 hex digits") && e.contains("od -An -tx1") && !e.contains("UTF-8"), "{e}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(&path, "ab".repeat(32)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(secret_file_warning(&path), None);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(secret_file_warning(&path).is_some_and(|w| w.contains("644") && w.contains("chmod 600")));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
