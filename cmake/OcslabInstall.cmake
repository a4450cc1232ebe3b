# What `cmake --install` and CPack put where (docs/install.md). Targets install themselves
# (ocslab_library EXPORT, ocslab_executable INSTALL, the plot script in experiments/tool/); this
# file installs the rest, writes the CMake and pkg-config packages of libocs-dev, and sets up the
# three Debian packages: ocslab (tools, plot script, docs), ocslab-agent (daemon, unit, sudoers
# example) and libocs-dev (static libraries, public headers, CMake package, ocslab.pc).
include(CMakePackageConfigHelpers)

# ---- the agent's systemd unit and sudoers example ----
# Both name the installed binary, so they are written when installing: the prefix is then known
# (`cmake --install --prefix`, CPack's /usr). The repository's unit names /usr/local/bin (the
# Ansible role installs it as is, with a drop-in for its paths).
set(OCSLAB_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where the agent's unit is installed, relative to the prefix")
file(READ ${PROJECT_SOURCE_DIR}/agent/systemd/ocslab-agent.service _unit)
string(REPLACE "/usr/local/bin/ocslab-agent" "@OCSLAB_BINDIR@/ocslab-agent" _unit "${_unit}")
string(REPLACE "/usr/share/doc/ocslab/" "@OCSLAB_DOCDIR@/" _unit "${_unit}")
file(WRITE ${PROJECT_BINARY_DIR}/install/ocslab-agent.service.in "${_unit}")
# The sudoers rule lets one named user start the stdio bridge (and the runner's forwarding commands) as root. A package cannot know that
# user, and a file in /etc/sudoers.d takes effect the moment it is unpacked, so the package ships
# it as an example (what Debian packages do with optional privilege grants); the Ansible role
# (ansible/roles/ocslab_agent/templates/sudoers.j2, the one source of the rule) or the admin
# copies it to /etc/sudoers.d with the lab's user.
# A change to the template reconfigures, or the example would keep the old rule.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/ansible/roles/ocslab_agent/templates/sudoers.j2)
file(READ ${PROJECT_SOURCE_DIR}/ansible/roles/ocslab_agent/templates/sudoers.j2 _sudoers)
string(REPLACE "Written by the ocslab_agent role" "Example from the ocslab-agent package; copy it to
# /etc/sudoers.d/ocslab-agent (mode 0440; check with visudo -cf) and name the runner's user" _sudoers "${_sudoers}")
string(REPLACE "{{ ocslab_agent_user }}" "ocslab" _sudoers "${_sudoers}")
string(REPLACE "{{ ocslab_agent_binary }}" "@OCSLAB_BINDIR@/ocslab-agent" _sudoers "${_sudoers}")
string(REPLACE "{{ ocslab_agent_socket }}" "/run/ocslab-agent/agent.sock" _sudoers "${_sudoers}")
# The regular-expression lines take the folder escaped; this one has nothing to escape.
string(REPLACE "{{ ocslab_forwarding_state_dir | regex_escape }}" "/var/lib/ocslab/forwarding" _sudoers "${_sudoers}")
string(REPLACE "{{ ocslab_forwarding_state_dir }}" "/var/lib/ocslab/forwarding" _sudoers "${_sudoers}")
if(_sudoers MATCHES "{{")
  message(FATAL_ERROR "sudoers.j2 uses a variable cmake/OcslabInstall.cmake does not fill in")
endif()
file(WRITE ${PROJECT_BINARY_DIR}/install/sudoers.in "${_sudoers}")
foreach(_file IN ITEMS ocslab-agent.service=${OCSLAB_SYSTEMD_UNIT_DIR} sudoers=${CMAKE_INSTALL_DATADIR}/doc/ocslab-agent/examples)
  string(REPLACE "=" ";" _file "${_file}")
  list(GET _file 0 _name)
  list(GET _file 1 _dest)
  install(CODE "
    set(OCSLAB_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    set(OCSLAB_DOCDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}\")
    configure_file(\"${PROJECT_BINARY_DIR}/install/${_name}.in\" \"${PROJECT_BINARY_DIR}/install/${_name}\" @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${_dest}\" TYPE FILE FILES \"${PROJECT_BINARY_DIR}/install/${_name}\")
  " COMPONENT ocslab-agent)
endforeach()

# ---- documentation, man pages, bash completion ----
if(OCSLAB_COMPONENTS STREQUAL "all")
  file(GLOB _docs ${PROJECT_SOURCE_DIR}/docs/*.md)
  install(FILES ${PROJECT_SOURCE_DIR}/README.md ${_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ocslab)
  # The README's no-lab path analyses and plots this sample (share/doc/ocslab/samples/).
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/experiments/samples DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ocslab)
endif()
# The man pages and bash completions ocslab_cli_docs makes from each program's --help
# (cmake/OcslabHelpers.cmake, docs/cli.md): those of ocslab-agent go to the agent's package, the
# rest to ocslab's (the NCCL workload's to its own component). Pages are installed gzipped.
get_property(_pages GLOBAL PROPERTY OCSLAB_MAN_PAGES)
get_property(_completions GLOBAL PROPERTY OCSLAB_COMPLETIONS)
foreach(_file IN LISTS _pages _completions)
  get_filename_component(_name ${_file} NAME)
  set(_component ocslab)
  if(_name MATCHES "^ocslab-collbench-nccl")
    set(_component ocslab-nccl)
  elseif(_name MATCHES "^ocslab-agent")
    set(_component ocslab-agent)
  endif()
  if(_file IN_LIST _pages)
    string(REGEX MATCH "[^.]+$" _section "${_name}")
    install(FILES ${_file}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section} COMPONENT ${_component})
  else()
    install(FILES ${_file} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT ${_component})
  endif()
endforeach()

# ---- libocs-dev: CMake package and pkg-config file ----
set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ocslab)
install(EXPORT ocslabTargets NAMESPACE ocslab:: DESTINATION ${_cmake_dir} COMPONENT libocs-dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ocslabConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/ocslabConfig.cmake INSTALL_DESTINATION ${_cmake_dir})
# 0.x: a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/ocslabConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/ocslabConfig.cmake ${PROJECT_BINARY_DIR}/install/ocslabConfigVersion.cmake
        DESTINATION ${_cmake_dir} COMPONENT libocs-dev)
# Relative to the .pc file, so a staged or relocated install finds its own headers.
file(RELATIVE_PATH OCSLAB_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/ocslab.pc.in ${PROJECT_BINARY_DIR}/install/ocslab.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/ocslab.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT libocs-dev)

# ---- Debian packages (`make deb`: build/packages/*.deb) ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ocslab)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Descriptions: the first line is the synopsis; CPack indents the rest as Debian wants.
# ocslab-collbench-nccl (component ocslab-nccl, `cmake --install build --component ocslab-nccl`)
# is left out: it links NVIDIA's CUDA runtime and NCCL, which no Debian package provides.
if(OCSLAB_COMPONENTS STREQUAL "all")
  set(CPACK_COMPONENTS_ALL ocslab ocslab-agent libocs-dev)
else()
  set(CPACK_COMPONENTS_ALL ocslab-agent libocs-dev)
endif()
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "ocslab maintainers <ocslab@example.org>")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.org/ocslab")
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_OCSLAB_PACKAGE_NAME ocslab)
set(CPACK_COMPONENT_OCSLAB_DESCRIPTION "optical circuit switch testbed tools
ocsctl drives optical circuit switches (TL1, NETCONF, SCPI) and emulates
them; ocslab runs reconfiguration experiments across lab hosts, boots
virtual labs, analyses and plots the results; ocslab-collbench-verbs runs
collective workloads over ibverbs.")
# ocslab-agent: `ocslab run` copies this machine's agent into a virtual lab's guests (and runs
# `ocslab-agent capture` for the no-lab path); without it a virtual-lab run stops at once.
set(CPACK_DEBIAN_OCSLAB_PACKAGE_RECOMMENDS "ocslab-agent (= ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}), python3, python3-matplotlib")
# python3-torch: the PyTorch backend (lib/python3/dist-packages/ocslab) imports it.
set(CPACK_DEBIAN_OCSLAB_PACKAGE_SUGGESTS "qemu-system-x86, busybox-static, python3-torch")
set(CPACK_DEBIAN_OCSLAB-AGENT_PACKAGE_NAME ocslab-agent)
set(CPACK_COMPONENT_OCSLAB-AGENT_DESCRIPTION "probe daemon for optical circuit switch experiments
ocslab-agent runs on each lab host: it samples carrier, NIC firmware link
state, Rx power, RDMA resumption and clock offset while the switch
reconfigures, and programs host-based RDMA forwarding. With a hardened
systemd unit and a sudoers example for the runner's user.")
set(CPACK_DEBIAN_OCSLAB-AGENT_PACKAGE_SUGGESTS "sudo")
set(CPACK_DEBIAN_LIBOCS-DEV_PACKAGE_NAME libocs-dev)
set(CPACK_DEBIAN_LIBOCS-DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_LIBOCS-DEV_DESCRIPTION "ocslab's switch-control library (static) and headers
libocs opens an optical circuit switch from a URL (TL1, NETCONF, SCPI) and
lists, makes and removes its circuits; also the ocslab agent client and
the forwarding model. Static libraries, public headers, a CMake package
(find_package(ocslab)) and a pkg-config file (ocslab.pc).")
# Static libraries: shlibdeps finds nothing to compute, so the -dev packages of what they link.
set(CPACK_DEBIAN_LIBOCS-DEV_PACKAGE_DEPENDS
    "libssh-dev, libpugixml-dev, libmnl-dev, libfmt-dev, libspdlog-dev, libyaml-cpp-dev, nlohmann-json3-dev")

# Debian wants /usr/share/doc/<package>/changelog.Debian.gz in every binary package (lintian's
# no-changelog error otherwise), which CPack does not write: one entry per package for this
# version, gzipped as dh_compress does (-9, no name or time stamp in the header). The entry's
# date is the configure time, or SOURCE_DATE_EPOCH where that is set (a reproducible build).
find_program(OCSLAB_GZIP gzip)
if(OCSLAB_GZIP)
  string(TIMESTAMP _changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
  foreach(_package IN LISTS CPACK_COMPONENTS_ALL)
    set(_dir ${PROJECT_BINARY_DIR}/install/changelog/${_package})
    file(WRITE ${_dir}/changelog.Debian "${_package} (${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}) unstable; urgency=medium

  * Packaged by CPack from the ocslab source tree (make deb, docs/install.md).

 -- ${CPACK_DEBIAN_PACKAGE_MAINTAINER}  ${_changelog_date}
")
    execute_process(COMMAND ${OCSLAB_GZIP} -9 -n -c INPUT_FILE ${_dir}/changelog.Debian
                    OUTPUT_FILE ${_dir}/changelog.Debian.gz RESULT_VARIABLE _gzip_rc)
    if(NOT _gzip_rc EQUAL 0)
      message(FATAL_ERROR "gzip of ${_dir}/changelog.Debian failed: ${_gzip_rc}")
    endif()
    install(FILES ${_dir}/changelog.Debian.gz DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_package} COMPONENT ${_package})
  endforeach()
else()
  message(STATUS "gzip not found: the Debian packages will have no changelog.Debian.gz")
endif()
include(CPack)
