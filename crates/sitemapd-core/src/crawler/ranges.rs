//! The IP ranges a crawler's operator publishes (helper: being written).

/// A set of IP networks, parsed from an operator's range file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpRanges {
    nets: Vec<(std::net::IpAddr, u8)>,
}

impl IpRanges {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut nets = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (a, p) = line.split_once('/').unwrap_or((line, "32"));
            nets.push((a.parse().map_err(|_| line.to_owned())?, p.parse().map_err(|_| line.to_owned())?));
        }
        Ok(Self { nets })
    }
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.nets.iter().any(|(a, p)| match (a, ip) {
            (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) => {
                let m = if *p == 0 { 0 } else { u32::MAX << (32 - p) };
                u32::from(*a) & m == u32::from(b) & m
            }
            _ => false,
        })
    }
    pub fn len(&self) -> usize {
        self.nets.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }
    pub fn creation_time(&self) -> Option<&str> {
        None
    }
}
