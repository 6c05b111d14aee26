#pragma once
// A communicator whose failed collectives name the members that are gone: it passes every call
// to another communicator, and a collective that fails comes back with a roll call's findings
// (roll_call.h) appended to its error. For transports whose own errors name no rank (Gloo's
// "Timed out waiting ... for recv", "Connection closed by peer"): a chunk on Gloo, and the flat
// part of a chunk spanning hosts.
#include "transports/forwarding_communicator.h"
#include "transports/roll_call.h"

#include <memory>

namespace c10d_func {

// A Completion that finishes as `upstream` does; a failure's reason gets `roll_call`'s findings
// (the first failure only: the members are out of step after it).
Completion explained_by(const Completion& upstream,
                        const std::shared_ptr<FailureRollCall>& roll_call);

// `inner`, with every collective's Completion explained_by `roll_call`.
std::shared_ptr<Communicator> reporting_missing_members(std::shared_ptr<Communicator> inner,
                                                        std::shared_ptr<FailureRollCall> roll_call);

}  // namespace c10d_func
