//! `--image SERVICE=IMAGE`: a run's replacement for one service's Docker image, so a plan that
//! names the upstream images runs unchanged against locally built ones.

use std::fmt;
use std::str::FromStr;

use super::Plan;

/// The services whose image a plan names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageSlot {
    Postgres,
    Nats,
    Nodes,
}

impl fmt::Display for ImageSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageSlot::Postgres => "postgres",
            ImageSlot::Nats => "nats",
            ImageSlot::Nodes => "nodes",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageOverride {
    pub slot: ImageSlot,
    pub image: String,
}

impl FromStr for ImageOverride {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (slot, image) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}`: expected SERVICE=IMAGE, e.g. nats=nats:2.10"))?;
        let slot = match slot {
            "postgres" => ImageSlot::Postgres,
            "nats" => ImageSlot::Nats,
            "nodes" => ImageSlot::Nodes,
            other => return Err(format!("`{other}`: the service is postgres, nats or nodes")),
        };
        if image.is_empty() || image.contains(char::is_whitespace) {
            return Err(format!("`{image}` is not an image reference"));
        }
        Ok(ImageOverride {
            slot,
            image: image.to_owned(),
        })
    }
}

impl Plan {
    /// The same plan with one service's image replaced. A service the plan does not run is
    /// left alone, so one set of `--image` flags serves every plan of a suite.
    pub fn with_image(mut self, replace: &ImageOverride) -> Plan {
        let image = Some(replace.image.clone());
        match replace.slot {
            ImageSlot::Postgres => {
                if let Some(pg) = &mut self.services.postgres {
                    pg.image = image;
                }
            }
            ImageSlot::Nats => {
                if let Some(nats) = &mut self.services.nats {
                    nats.image = image;
                }
            }
            ImageSlot::Nodes => self.services.nodes.image = image,
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_service_and_image() {
        let o: ImageOverride = "postgres=anyplay/postgres:local".parse().unwrap();
        assert_eq!(o.slot, ImageSlot::Postgres);
        assert_eq!(o.image, "anyplay/postgres:local");
        assert!("nodes=registry:5000/team/node:1.2"
            .parse::<ImageOverride>()
            .is_ok());
        assert!("redis=redis:7".parse::<ImageOverride>().is_err());
        assert!("postgres".parse::<ImageOverride>().is_err());
        assert!("nats=".parse::<ImageOverride>().is_err());
    }

    #[test]
    fn replaces_only_services_the_plan_has() {
        let plan = Plan::from_yaml("name: one\nload: {players: 2}\n").unwrap();
        let nodes = plan.clone().with_image(&"nodes=me/node:1".parse().unwrap());
        assert_eq!(nodes.services.nodes.image.as_deref(), Some("me/node:1"));
        let same = plan.clone().with_image(&"nats=nats:2.10".parse().unwrap());
        assert_eq!(same, plan);
    }
}
