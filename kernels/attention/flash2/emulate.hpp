#pragma once
/// The flash2 launchers on the CPU emulator: the same kernel bodies, grids and launch order as
/// cuda.hpp, on host memory. For tests (slow: about a million warp operations per second).
#include <vector>

#include "api.hpp"
#include "emulator.hpp"

namespace cpsim::kernels::flash2::emulate {

/// `memory` lists every buffer the call may touch (inputs read-only, outputs and the
/// workspace writable); anything else is a kernel fault. Throw std::invalid_argument when
/// check() rejects the arguments.
void forward(const ForwardArgs& args, const std::vector<emu::Span>& memory,
             emu::CopyTiming timing = emu::CopyTiming::Deferred);
void backward(const BackwardArgs& args, const std::vector<emu::Span>& memory,
              emu::CopyTiming timing = emu::CopyTiming::Deferred);
void merge(const MergeArgs& args, const std::vector<emu::Span>& memory);

}  // namespace cpsim::kernels::flash2::emulate
