//! Loopback ports a test hands to a process it starts.
//!
//! Binding port 0, reading the number and closing the socket leaves a window in which any other
//! socket on the machine — another test's listener, a browser's outgoing connection — may be
//! given the same port, and the process the test starts later fails with "address in use". A
//! [`Reserved`] port stays bound, with `SO_REUSEADDR` and never listening, for as long as the
//! test holds it: the kernel hands it to no other `bind` to port 0 and to no outgoing
//! connection, while a server that binds it with `SO_REUSEADDR` (as tokio's listeners do) may
//! still listen on it, as often as the test starts one.

use std::net::{Ipv4Addr, SocketAddr};

use socket2::{Domain, Socket, Type};

/// A loopback port kept from everyone but servers the test starts on it.
#[derive(Debug)]
pub struct Reserved {
    // Held only to keep the port bound.
    _socket: Socket,
    port: u16,
}

impl Reserved {
    /// Reserves a free port on 127.0.0.1.
    ///
    /// # Panics
    ///
    /// When the machine has no free port, which leaves the test nothing to run on.
    #[must_use]
    pub fn new() -> Reserved {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        socket.set_reuse_address(true).expect("SO_REUSEADDR");
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        socket.bind(&any.into()).expect("bind a free port");
        let port = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.port())
            .expect("the bound port");
        Reserved {
            _socket: socket,
            port,
        }
    }

    /// The port's number.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Default for Reserved {
    fn default() -> Reserved {
        Reserved::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// A listener on `port`, with `SO_REUSEADDR` (as tokio and std bind one) or without.
    fn listener(port: u16, reuse: bool) -> std::io::Result<TcpListener> {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
        socket.set_reuse_address(reuse)?;
        socket.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)).into())?;
        socket.listen(8)?;
        Ok(socket.into())
    }

    fn echo_once(listener: &TcpListener, port: u16) {
        let mut client = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
        let (mut served, _) = listener.accept().expect("accept");
        client.write_all(b"x").expect("write");
        let mut got = [0u8; 1];
        served.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"x");
    }

    #[test]
    fn a_reserved_port_takes_reusing_listeners_one_after_another_and_no_plain_binder() {
        let reserved = Reserved::new();
        let port = reserved.port();
        assert_ne!(port, 0);
        let plain = listener(port, false);
        assert_eq!(
            plain.map(|_| ()).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::AddrInUse),
            "a binder without SO_REUSEADDR must be refused"
        );
        for _ in 0..2 {
            let server = listener(port, true).expect("a reusing listener on the port");
            echo_once(&server, port);
        }
    }
}
