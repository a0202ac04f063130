// placeholder: written by the io/app work
#include "convbank/io/npy.hpp"
