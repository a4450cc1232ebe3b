// Private to the control plane: what a transport needs to start a protocol session, shared
// by value so that work still queued on the loop after stop() never reaches a dead object.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "ocslab/emulator/protocol_session.h"

namespace ocslab::emu {

using SessionFactory =
    std::function<std::unique_ptr<ProtocolSession>(ProtocolSession::SendFn, ProtocolSession::CloseFn)>;

// Sessions alive right now, over every transport (read from any thread).
using SessionCounter = std::shared_ptr<std::atomic<size_t>>;

}  // namespace ocslab::emu
