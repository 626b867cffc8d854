// Headers shared by every backend source, compiled once (CMake PCH).
#pragma once

#include <ATen/ATen.h>
#include <ATen/MetaFunctions.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>
