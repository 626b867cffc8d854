# Locates the installed torch wheel and defines the imported target
# openreg::torch. We do not use find_package(Torch): it probes for CUDA and
# asks for a libkineto.a that pip wheels do not ship (Kineto lives inside
# libtorch_cpu.so). Everything comes from the wheel's own headers and libs.
find_package(Python3 3.11 REQUIRED COMPONENTS Interpreter Development.Module)

execute_process(
  COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0
          ${Python3_EXECUTABLE} -c
          "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_info
  RESULT_VARIABLE _torch_result
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_result EQUAL 0)
  message(FATAL_ERROR "openreg: cannot import torch with ${Python3_EXECUTABLE}; install torch==2.13.0 first")
endif()
string(REPLACE "\n" ";" _torch_info "${_torch_info}")
list(GET _torch_info 0 OPENREG_TORCH_DIR)
list(GET _torch_info 1 OPENREG_TORCH_CXX11_ABI)
list(GET _torch_info 2 OPENREG_TORCH_VERSION)
if(NOT OPENREG_TORCH_VERSION MATCHES "^2\\.13\\.0")
  message(FATAL_ERROR "openreg is pinned to torch 2.13.0, found ${OPENREG_TORCH_VERSION}")
endif()
if(NOT EXISTS "${OPENREG_TORCH_DIR}/include/kineto/libkineto.h")
  message(FATAL_ERROR "openreg: the torch wheel at ${OPENREG_TORCH_DIR} ships no Kineto headers")
endif()
message(STATUS "openreg: torch ${OPENREG_TORCH_VERSION} at ${OPENREG_TORCH_DIR}")

add_library(openreg_torch INTERFACE)
add_library(openreg::torch ALIAS openreg_torch)
target_include_directories(openreg_torch SYSTEM INTERFACE
  "${OPENREG_TORCH_DIR}/include"
  "${OPENREG_TORCH_DIR}/include/torch/csrc/api/include"
  "${OPENREG_TORCH_DIR}/include/kineto")
target_compile_definitions(openreg_torch INTERFACE
  _GLIBCXX_USE_CXX11_ABI=${OPENREG_TORCH_CXX11_ABI}
  USE_KINETO
  KINETO_NAMESPACE=libkineto
  FMT_HEADER_ONLY)
target_link_directories(openreg_torch INTERFACE "${OPENREG_TORCH_DIR}/lib")
target_link_libraries(openreg_torch INTERFACE torch torch_cpu c10)

# Python-facing pieces also need libtorch_python and the interpreter headers.
add_library(openreg_torch_python INTERFACE)
add_library(openreg::torch_python ALIAS openreg_torch_python)
target_link_libraries(openreg_torch_python INTERFACE openreg::torch torch_python Python3::Module)

# Where the package finds its shared libraries: OPENREG_PACKAGE_LIB_DIR (top
# CMakeLists.txt).
