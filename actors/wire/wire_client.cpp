#include "actors/wire/wire_client.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "actors/wire/wire_frame.hpp"
#include "tls/tls_client.hpp"

namespace proctor {

namespace {

using clock_type = std::chrono::steady_clock;

std::string seconds_text(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

/// "Connection refused" as "connection refused": it follows a colon in the message.
std::string lower_first(std::string s) {
  if (!s.empty())
    s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

/// Closes the descriptor when it goes out of scope.
class socket_guard {
public:
  explicit socket_guard(int fd) : fd_(fd) {}
  ~socket_guard() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  socket_guard(const socket_guard&) = delete;
  socket_guard& operator=(const socket_guard&) = delete;
  int get() const noexcept { return fd_; }

private:
  int fd_;
};

enum class wait_result { ready, timed_out, cancelled, failed };

/// Polls `fd` for `events` until `deadline`, in slices of 100 ms when `cancel` is set.
wait_result wait_for(int fd, short events, clock_type::time_point deadline,
                     const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancel && cancel->load(std::memory_order_relaxed))
      return wait_result::cancelled;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0)
      return wait_result::timed_out;
    if (cancel)
      left = std::min(left, std::chrono::milliseconds{100});
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0)
      return wait_result::ready;
    if (n < 0 && errno != EINTR)
      return wait_result::failed;
  }
}

wire_result fail(wire_result::kind k, std::string reason) {
  wire_result r;
  r.what = k;
  r.reason = std::move(reason);
  return r;
}

/// A connected, nonblocking socket to one of host's addresses, or -1 and `*why`.
int connect_to(const std::string& host, uint16_t port, const wire_call_options& opts,
               wire_result* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    *why =
      fail(wire_result::kind::unreachable, "cannot resolve " + host + ": " + ::gai_strerror(rc));
    return -1;
  }
  auto deadline = clock_type::now() + opts.connect_timeout;
  std::string last = "no address";
  int result = -1;
  for (auto* a = found; a != nullptr && result < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = lower_first(std::strerror(errno));
      continue;
    }
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        switch (wait_for(fd, POLLOUT, deadline, opts.cancel)) {
          case wait_result::ready: {
            socklen_t len = sizeof err;
            if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
              err = errno;
            break;
          }
          case wait_result::timed_out:
            err = ETIMEDOUT;
            break;
          case wait_result::cancelled:
            ::close(fd);
            ::freeaddrinfo(found);
            *why = fail(wire_result::kind::cancelled, "cancelled");
            return -1;
          case wait_result::failed:
            err = errno;
            break;
        }
      }
    }
    if (err != 0) {
      last = err == ETIMEDOUT ? "no connection within " + seconds_text(opts.connect_timeout)
                              : lower_first(std::strerror(err));
      ::close(fd);
      continue;
    }
    // One write per frame each way, but a request and its reply must not sit out a
    // delayed ACK when a frame spans two segments.
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    result = fd;
  }
  ::freeaddrinfo(found);
  if (result < 0) {
    *why = fail(wire_result::kind::unreachable, last);
  }
  return result;
}

}  // namespace

int wire_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                 std::string* why) {
  wire_call_options opts;
  opts.connect_timeout = timeout;
  wire_result r;
  int fd = connect_to(host, port, opts, &r);
  if (fd < 0 && why != nullptr)
    *why = r.reason;
  return fd;
}

namespace {

/// The connection a call talks over: the socket itself, or a TLS session on it. Each call
/// moves some bytes or says what to poll for; the caller keeps the deadlines.
class channel {
public:
  using step = tls_client_session::step;

  explicit channel(int fd) : fd_(fd) {}
  void use_tls(std::unique_ptr<tls_client_session> tls) { tls_ = std::move(tls); }
  bool tls() const noexcept { return tls_ != nullptr; }
  const std::string& tls_error() const { return tls_->error(); }
  step handshake() { return tls_->handshake(); }

  step send(const char* buf, size_t len, size_t* n) {
    if (tls_)
      return tls_->write(buf, len, n);
    *n = 0;
    auto r = ::send(fd_, buf, len, MSG_NOSIGNAL);
    if (r > 0)
      *n = static_cast<size_t>(r);
    return r > 0 ? step::done : os_step(r, step::want_write);
  }

  step recv(char* buf, size_t len, size_t* n) {
    if (tls_)
      return tls_->read(buf, len, n);
    *n = 0;
    auto r = ::recv(fd_, buf, len, 0);
    if (r > 0)
      *n = static_cast<size_t>(r);
    return r > 0 ? step::done : r == 0 ? step::closed : os_step(r, step::want_read);
  }

private:
  static step os_step(ssize_t, step would_block) {
    if (errno == EINTR)
      return step::done;  // nothing moved (*n is 0): call again
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return would_block;
    return errno == ECONNRESET || errno == EPIPE ? step::closed : step::failed;
  }

  int fd_;
  std::unique_ptr<tls_client_session> tls_;
};

/// Polls for what `s` asks until `deadline`; `std::nullopt` to go on, else how it ended.
std::optional<wait_result> wait_step(int fd, channel::step s, clock_type::time_point deadline,
                                     const std::atomic<bool>* cancel) {
  auto events = s == channel::step::want_read ? POLLIN : POLLOUT;
  auto w = wait_for(fd, static_cast<short>(events), deadline, cancel);
  if (w == wait_result::ready)
    return std::nullopt;
  return w;
}

/// The TLS handshake within connect_timeout; an empty result when it went through.
std::optional<wire_result> tls_handshake(channel& ch, int fd, const std::string& where,
                                         const wire_call_options& opts) {
  auto deadline = clock_type::now() + opts.connect_timeout;
  for (;;) {
    auto s = ch.handshake();
    switch (s) {
      case channel::step::done:
        return std::nullopt;
      case channel::step::closed:
        return fail(wire_result::kind::unreachable, "TLS handshake with " + where
                                                      + " failed: the node closed the connection"
                                                      + " (does it speak TLS?)");
      case channel::step::failed:
        return fail(wire_result::kind::unreachable,
                    "TLS handshake with " + where + " failed: " + ch.tls_error());
      default:
        break;
    }
    if (auto w = wait_step(fd, s, deadline, opts.cancel)) {
      if (*w == wait_result::cancelled)
        return fail(wire_result::kind::cancelled, "cancelled");
      return fail(wire_result::kind::unreachable, "TLS handshake with " + where
                                                    + " failed: no answer within "
                                                    + seconds_text(opts.connect_timeout));
    }
  }
}

}  // namespace

wire_result wire_call(const std::string& host, uint16_t port, std::string_view request,
                      const wire_call_options& opts) {
  if (request.empty() || request.size() > max_frame_bytes)
    return fail(wire_result::kind::unreachable,
                "request of " + std::to_string(request.size()) + " bytes cannot be sent");
  wire_result why;
  socket_guard sock{connect_to(host, port, opts, &why)};
  if (sock.get() < 0)
    return why;
  auto where =
    (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  channel ch{sock.get()};
  if (opts.tls.enabled()) {
    std::string err;
    auto session = tls_client_session::make(opts.tls, sock.get(), host, &err);
    if (!session)
      return fail(wire_result::kind::unreachable, err);
    ch.use_tls(std::move(session));
    if (auto refused = tls_handshake(ch, sock.get(), where, opts))
      return *refused;
  }
  auto deadline = clock_type::now() + opts.reply_timeout;
  auto timed_out = [&] {
    return fail(wire_result::kind::no_answer,
                "the node did not answer within " + seconds_text(opts.reply_timeout));
  };
  auto lost = [] {
    return fail(wire_result::kind::dropped, "the connection to the node was lost");
  };
  bool got_bytes = false;
  // Why a connection ended before any reply byte. With TLS 1.3 the node's verdict on this
  // client's certificate comes after the client's side of the handshake, as the first read.
  auto ended = [&](channel::step s) {
    if (got_bytes)
      return lost();
    if (ch.tls() && s == channel::step::failed)
      return fail(wire_result::kind::unreachable,
                  "TLS handshake with " + where + " failed: " + ch.tls_error());
    // A node that refuses the certificate closes at once; its alert is lost when the close
    // comes as a reset (it had not read the request).
    if (ch.tls())
      return fail(wire_result::kind::unreachable,
                  "TLS handshake with " + where
                    + " failed: the node closed the connection (did it refuse this client's "
                      "certificate?)");
    if (s == channel::step::closed)
      return fail(wire_result::kind::dropped,
                  std::string{"the node closed the connection without answering"}
                    + (ch.tls() ? "" : " (a node with TLS on closes connections without it)"));
    return lost();
  };
  auto wait_failed = [&](wait_result w) {
    if (w == wait_result::timed_out)
      return timed_out();
    if (w == wait_result::cancelled)
      return fail(wire_result::kind::cancelled, "cancelled");
    return lost();
  };
  auto frame = make_frame(request);
  for (size_t sent = 0; sent < frame.size();) {
    size_t n = 0;
    auto s = ch.send(frame.data() + sent, frame.size() - sent, &n);
    sent += n;
    if (s == channel::step::done)
      continue;
    if (s == channel::step::closed || s == channel::step::failed)
      return ended(s);
    if (auto w = wait_step(sock.get(), s, deadline, opts.cancel))
      return wait_failed(*w);
  }
  frame_reader reader{opts.max_reply_bytes, true};
  char buf[16 * 1024];
  for (;;) {
    std::string payload;
    switch (reader.next(&payload)) {
      case frame_reader::status::frame: {
        wire_result r;
        r.what = wire_result::kind::reply;
        r.reply = std::move(payload);
        return r;
      }
      case frame_reader::status::refused:
        return fail(wire_result::kind::dropped,
                    "the node sent a malformed reply ("
                      + describe_refused_frame(reader.refused_length(), opts.max_reply_bytes)
                      + ")");
      case frame_reader::status::need_more:
        break;
    }
    size_t n = 0;
    auto s = ch.recv(buf, sizeof buf, &n);
    if (n > 0) {
      got_bytes = true;
      reader.append(std::string_view{buf, n});
      continue;
    }
    if (s == channel::step::done)
      continue;
    if (s == channel::step::closed || s == channel::step::failed)
      return ended(s);
    if (auto w = wait_step(sock.get(), s, deadline, opts.cancel))
      return wait_failed(*w);
  }
}

}  // namespace proctor
