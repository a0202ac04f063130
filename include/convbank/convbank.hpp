// Umbrella header: the whole public API.
#pragma once

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/filterbank.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/io/safetensors.hpp"
#if defined(CONVBANK_WITH_SNDFILE)
#include "convbank/io/audio_file.hpp"
#endif
#include "convbank/presets.hpp"
#include "convbank/runtime.hpp"
#include "convbank/stream.hpp"
#include "convbank/tensor.hpp"
