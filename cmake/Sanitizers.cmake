# openreg_sanitize(<target>): applies OPENREG_SANITIZER to a runtime target.
# Only the torch-free runtime, its tests and benchmarks are sanitized: the
# torch wheel itself is not built with sanitizers.
function(openreg_sanitize target)
  if(OPENREG_SANITIZER STREQUAL "address")
    set(flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  elseif(OPENREG_SANITIZER STREQUAL "thread")
    set(flags -fsanitize=thread -fno-omit-frame-pointer)
  elseif(OPENREG_SANITIZER STREQUAL "")
    return()
  else()
    message(FATAL_ERROR "OPENREG_SANITIZER must be '', 'address' or 'thread', not '${OPENREG_SANITIZER}'")
  endif()
  target_compile_options(${target} PRIVATE ${flags})
  target_link_options(${target} PRIVATE ${flags})
endfunction()
