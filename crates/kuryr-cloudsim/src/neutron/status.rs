//! Port status transitions. A port with `binding:host_id` goes ACTIVE after `port_active_delay`
//! (its VM NIC is plugged); a trunk subport goes ACTIVE `subport_active_delay` after it was added,
//! once its parent is ACTIVE (ML2/OVN behaviour); losing either sends it back to DOWN.

use crate::state::Jobs;
use crate::world::World;

fn set_status(w: &mut World, port_id: &str, status: &str) {
    if let Some(p) = w.ports.get_mut(port_id) {
        if p.status != status {
            p.status = status.to_owned();
            p.std.touch();
        }
    }
}

/// Called after a port's binding changed: schedule ACTIVE or drop to DOWN now.
pub fn binding_changed(w: &mut World, jobs: &mut Jobs, port_id: &str) {
    let Some(p) = w.ports.get_mut(port_id) else { return };
    p.bind_epoch += 1;
    let bound = !p.host_id.is_empty();
    if w.trunk_by_subport.contains_key(port_id) {
        return;
    }
    if bound && jobs.profile.neutron.bound_port_goes_active {
        let epoch = p.bind_epoch;
        let delay = jobs.delay(&jobs.profile.neutron.port_active_delay.clone());
        let id = port_id.to_owned();
        jobs.at(delay, move |w, jobs| {
            if w.ports.get(&id).is_some_and(|p| p.bind_epoch == epoch) {
                set_status(w, &id, "ACTIVE");
                parent_went_active(w, jobs, &id);
            }
        });
    } else {
        set_status(w, port_id, "DOWN");
        parent_went_down(w, port_id);
    }
}

/// Schedule a subport's activation (right after add_subports, or when its parent comes up).
pub fn subport_added(w: &mut World, jobs: &mut Jobs, port_id: &str) {
    let Some(p) = w.ports.get_mut(port_id) else { return };
    p.bind_epoch += 1;
    let epoch = p.bind_epoch;
    let delay = jobs.delay(&jobs.profile.neutron.subport_active_delay.clone());
    let needs_parent = jobs.profile.neutron.subport_requires_active_parent;
    let id = port_id.to_owned();
    jobs.at(delay, move |w, _| {
        if w.ports.get(&id).is_none_or(|p| p.bind_epoch != epoch) {
            return;
        }
        let parent_active = w
            .trunk_by_subport
            .get(&id)
            .and_then(|t| w.trunks.get(t))
            .and_then(|t| w.ports.get(&t.port_id))
            .is_some_and(|p| p.status == "ACTIVE");
        if w.trunk_by_subport.contains_key(&id) && (parent_active || !needs_parent) {
            set_status(w, &id, "ACTIVE");
        }
    });
}

/// A subport left its trunk: DOWN now, and pending activations are void.
pub fn subport_removed(w: &mut World, port_id: &str) {
    if let Some(p) = w.ports.get_mut(port_id) {
        p.bind_epoch += 1;
    }
    set_status(w, port_id, "DOWN");
}

fn subports_of(w: &World, parent: &str) -> Vec<String> {
    w.trunk_by_parent
        .get(parent)
        .and_then(|t| w.trunks.get(t))
        .map(|t| t.sub_ports.iter().map(|s| s.port_id.clone()).collect())
        .unwrap_or_default()
}

fn parent_went_active(w: &mut World, jobs: &mut Jobs, parent: &str) {
    for sp in subports_of(w, parent) {
        if w.ports.get(&sp).is_some_and(|p| p.status != "ACTIVE") {
            subport_added(w, jobs, &sp);
        }
    }
}

fn parent_went_down(w: &mut World, parent: &str) {
    for sp in subports_of(w, parent) {
        subport_removed(w, &sp);
    }
}
