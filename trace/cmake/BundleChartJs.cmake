# Chart.js draws the HTML report's charts. A wheel carries its own copy, so
# that `openreg-trace report` works on any machine: taken at build time from
# OPENREG_CHARTJS, else from Debian's libjs-chart.js. Without one the wheel
# still builds, and `report` looks for Chart.js at run time (report/build.py).
set(OPENREG_CHARTJS "" CACHE FILEPATH "Chart.js (a UMD build: chart.umd.min.js or chart.min.js) to put in the wheel")
if(NOT OPENREG_CHARTJS)
  find_file(OPENREG_CHARTJS_FOUND NAMES chart.umd.min.js chart.min.js
    PATHS /usr/share/javascript/chart.js /usr/share/nodejs/chart.js/dist NO_DEFAULT_PATH)
  if(OPENREG_CHARTJS_FOUND)
    set(OPENREG_CHARTJS "${OPENREG_CHARTJS_FOUND}")
  endif()
endif()
if(OPENREG_CHARTJS)
  message(STATUS "openreg_trace: bundling Chart.js from ${OPENREG_CHARTJS}")
  install(FILES "${OPENREG_CHARTJS}" DESTINATION openreg_trace/report/vendor RENAME chart.min.js)
  # Its licence (MIT) travels with it.
  set(OPENREG_CHARTJS_LICENSE "/usr/share/doc/libjs-chart.js/copyright" CACHE FILEPATH "Chart.js's licence text")
  if(EXISTS "${OPENREG_CHARTJS_LICENSE}")
    install(FILES "${OPENREG_CHARTJS_LICENSE}" DESTINATION openreg_trace/report/vendor RENAME chart.js.LICENSE)
  else()
    message(FATAL_ERROR "openreg_trace: bundling ${OPENREG_CHARTJS} needs its licence text: "
                        "set OPENREG_CHARTJS_LICENSE")
  endif()
else()
  message(WARNING "openreg_trace: no Chart.js found (set OPENREG_CHARTJS, or install libjs-chart.js): "
                  "the report will look for it at run time")
endif()
