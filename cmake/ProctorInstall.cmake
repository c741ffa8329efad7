# Proctor as a library for authors' own nodes: `cmake --install` puts proctord, the operator
# CLI proctor and the certificate tool proctor-certs under bin, the headers under
# include/proctor (the include root an author's code sees: "include/proctor/state_machine.hpp",
# "include/proctor/run_node.hpp", and the generated "journal.pb.h"), the static libraries
# under lib, and a CMake package
# (lib/cmake/Proctor) so that
#
#   find_package(Proctor REQUIRED)
#   target_link_libraries(my_node PRIVATE Proctor::proctor)
#
# works; the package finds CAF (with the FindCAF.cmake shipped beside it), RocksDB, protobuf,
# spdlog, OpenSSL, prometheus-cpp and simdjson for its consumer. Inside another project's tree, add_subdirectory(proctor)
# gives the same Proctor::proctor target.
include(CMakePackageConfigHelpers)

# One target for everything an author links: the engine, run_node, the crash harness.
add_library(proctor_all INTERFACE)
target_link_libraries(proctor_all INTERFACE proctor_node proctor_testing)
set_target_properties(proctor_all PROPERTIES EXPORT_NAME proctor)
add_library(Proctor::proctor ALIAS proctor_all)
# The allocator Proctor's own executables link (jemalloc unless PROCTOR_JEMALLOC=OFF).
set_target_properties(proctor_allocator PROPERTIES EXPORT_NAME allocator)
add_library(Proctor::allocator ALIAS proctor_allocator)

set(PROCTOR_LIBRARIES proctor_proto proctor_calendar proctor_procedures proctor_persistence
  proctor_tls proctor_tls_caf proctor_replication proctor_supervision proctor_wire proctor_base
  proctor_scheduling proctor_cluster proctor_procedure proctor_executor proctor_http proctor_console proctor_node proctor_testing)
# Components (the Debian packages of cmake/ProctorPackage.cmake): `server` has the programs,
# `dev` what authors build with.
install(TARGETS ${PROCTOR_LIBRARIES} proctor_all proctor_allocator EXPORT ProctorTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS proctord proctor RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
# The operators' certificate tool (docs/tls.md), a script beside the programs.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/proctor-certs DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT server)

# The public headers: this list, and nothing else (tests/process/... and
# scripts/check_layers.py check that examples include only these).
set(PROCTOR_PUBLIC_HEADERS context.hpp crash_harness.hpp outcome.hpp policy.hpp
  proc_state.hpp procedure.hpp registry.hpp resource_lock.hpp run_node.hpp state_machine.hpp)
list(TRANSFORM PROCTOR_PUBLIC_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/include/proctor/)
install(FILES ${PROCTOR_PUBLIC_HEADERS}
  ${PROCTOR_GEN_DIR}/proctor/journal.pb.h ${PROCTOR_GEN_DIR}/proctor/wire.pb.h
  ${PROCTOR_GEN_DIR}/proctor/cluster.pb.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/proctor COMPONENT dev)

set(PROCTOR_CMAKE_DEST ${CMAKE_INSTALL_LIBDIR}/cmake/Proctor)
install(EXPORT ProctorTargets NAMESPACE Proctor:: DESTINATION ${PROCTOR_CMAKE_DEST} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ProctorConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ProctorConfig.cmake INSTALL_DESTINATION ${PROCTOR_CMAKE_DEST})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ProctorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ProctorConfig.cmake
  ${PROJECT_BINARY_DIR}/ProctorConfigVersion.cmake ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake
  DESTINATION ${PROCTOR_CMAKE_DEST} COMPONENT dev)
