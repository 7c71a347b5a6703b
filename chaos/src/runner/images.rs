//! Which image each service runs under the Docker backend, and what to tell a person whose
//! engine lacks one: the upstream images by default, the project's own image for nodes.

use crate::plan::{ImageSlot, Plan, Service, VersionSource};

pub const POSTGRES: &str = "postgres:16";
pub const NATS: &str = "nats:2.10";
/// Built by `deploy/images/build.sh` (no registry needed) or `deploy/Dockerfile`.
pub const NODE: &str = "anyplay/node:local";

/// The image of every service the plan runs.
pub fn of(plan: &Plan) -> Vec<(ImageSlot, String)> {
    of_services(plan, &plan.topology())
}

/// The images `services` run, each slot once.
pub fn of_services(plan: &Plan, services: &[Service]) -> Vec<(ImageSlot, String)> {
    let mut slots: Vec<ImageSlot> = Vec::new();
    for service in services {
        let slot = match service {
            Service::Postgres => ImageSlot::Postgres,
            Service::Nats => ImageSlot::Nats,
            Service::Node(_) => ImageSlot::Nodes,
        };
        if !slots.contains(&slot) {
            slots.push(slot);
        }
    }
    let mut images: Vec<(ImageSlot, String)> = slots
        .iter()
        .map(|&slot| (slot, image(plan, slot)))
        .collect();
    // The images nodes may be upgraded to, wherever nodes run in containers.
    if slots.contains(&ImageSlot::Nodes) {
        for version in plan.versions.values() {
            if let VersionSource::Image(image) = &version.source {
                images.push((ImageSlot::Nodes, image.clone()));
            }
        }
    }
    images
}

/// The image the plan names for `slot`, else the default.
pub fn image(plan: &Plan, slot: ImageSlot) -> String {
    let services = &plan.services;
    let (named, default) = match slot {
        ImageSlot::Postgres => (
            services.postgres.as_ref().and_then(|s| s.image.clone()),
            POSTGRES,
        ),
        ImageSlot::Nats => (services.nats.as_ref().and_then(|s| s.image.clone()), NATS),
        ImageSlot::Nodes => (services.nodes.image.clone(), NODE),
    };
    named.unwrap_or_else(|| default.to_owned())
}

/// The error for images the engine lacks: each, and how to get it.
pub fn missing(missing: &[(ImageSlot, &str)]) -> String {
    let mut text = String::from("the Docker engine lacks images this plan runs:");
    for (slot, image) in missing {
        let local = match slot {
            ImageSlot::Postgres => "anyplay/postgres:local",
            ImageSlot::Nats => "anyplay/nats:local",
            ImageSlot::Nodes => NODE,
        };
        let how = if image.starts_with("anyplay/") {
            let dockerfile = if *slot == ImageSlot::Nodes {
                ", or `docker build -f deploy/Dockerfile -t anyplay/node:local .` where pulls work"
            } else {
                ""
            };
            format!("build it with deploy/images/build.sh (no registry needed){dockerfile}")
        } else {
            format!(
                "`docker pull {image}`, or where nothing can be pulled build the local images \
                 with deploy/images/build.sh and add `--image {slot}={local}`"
            )
        };
        text.push_str(&format!("\n  - {slot}: {image}: {how}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_to_upstream_and_the_project_node() {
        let plan = Plan::from_yaml(
            "name: two\nstore: postgres\nservices:\n  postgres: {}\n  nats: {image: nats:2.9}\n  nodes: {count: 2}\nload: {players: 2}\n",
        )
        .unwrap();
        assert_eq!(
            of(&plan),
            vec![
                (ImageSlot::Postgres, POSTGRES.to_owned()),
                (ImageSlot::Nats, "nats:2.9".to_owned()),
                (ImageSlot::Nodes, NODE.to_owned()),
            ]
        );
        assert_eq!(image(&plan, ImageSlot::Nats), "nats:2.9");
    }

    #[test]
    fn says_how_to_get_each_missing_image() {
        let text = missing(&[
            (ImageSlot::Postgres, "postgres:16"),
            (ImageSlot::Nodes, "anyplay/node:local"),
        ]);
        assert!(text.contains("`docker pull postgres:16`"), "{text}");
        assert!(
            text.contains("--image postgres=anyplay/postgres:local"),
            "{text}"
        );
        assert!(
            text.contains("nodes: anyplay/node:local: build it with deploy/images/build.sh"),
            "{text}"
        );
    }
}
