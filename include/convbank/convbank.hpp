// Umbrella header: the whole public API.
#pragma once

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/runtime.hpp"
#include "convbank/tensor.hpp"
