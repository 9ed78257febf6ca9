/* SPDX-License-Identifier: MIT */
/*
 * tcp_tls.c - TLS 1.3 on the tcp transport (GnuTLS): credentials, the
 * handshake of both sides, the hand-over of the record layer to the
 * kernel (kTLS), and the user-space record layer where the kernel has
 * none. See transport.h ("TLS on tcp") and docs/PROTOCOL.md ("TLS").
 *
 * GnuTLS, not OpenSSL: gnutls_record_get_state() gives the negotiated
 * keys, IVs and sequence numbers of both directions, which is all kTLS
 * needs for TLS 1.3 (OpenSSL 3.0, Debian 12's, hands TLS 1.3 receive to
 * the kernel only from 3.2 on); it is what the kernel's own TLS
 * handshake daemon for NVMe/TCP (tlshd) uses, and what nbdkit and qemu
 * use for NBD.
 *
 * Reads during the handshake stop at record boundaries (the record
 * header first, then exactly its body), so when the handshake ends no
 * application record has left the socket: the kernel can take over
 * receiving from the next byte on.
 */
#include "tcp_internal.h"

#include <stdarg.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <linux/tls.h>

#ifndef TCP_ULP
#define TCP_ULP 31
#endif
#ifndef SOL_TLS
#define SOL_TLS 282
#endif

#define TLS_REC_HDR 5
#define TLS_REC_MAX 16384 /* plaintext bytes in a full record */
/*
 * Plaintext taken per tcp_tls_sendv(): bounds the ciphertext a connection
 * holds (its buffer grows to 128 KiB, kept while the connection lives).
 */
#define TLS_SEND_MAX (64u << 10)
/*
 * TLS 1.3 only (no session tickets either: GNUTLS_NO_TICKETS, as a
 * ticket record would reach kTLS). AES-GCM first: with AES-NI it costs
 * about 1 us per 4 KiB where ChaCha20, which GnuTLS chose here unasked,
 * cost 40 (nettle's generic code); kTLS has all three.
 */
#define TLS_PRIORITY                                                           \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:" \
	"+CHACHA20-POLY1305:+ECDHE-PSK:+DHE-PSK:+PSK"

struct xp_tls {
	bool server;
	bool no_ktls;
	gnutls_priority_t prio;
	gnutls_psk_client_credentials_t psk_cli;
	gnutls_psk_server_credentials_t psk_srv;
	gnutls_certificate_credentials_t x509;
	bool verify_client; /* server: a CA for client certificates */
	xp_tls_psk_fn psk_lookup;
	void *psk_arg;
};

/* One connection's TLS session; it moves with the socket. */
struct tcp_tls {
	gnutls_session_t s;
	struct xp_tls *creds;
	int fd;
	bool hs_over; /* gnutls_handshake() is done; our last flight sent? */
	bool hs_done; /* and sent: the session carries records */
	int err;      /* errno of a failed record: every later call fails so */
	/* handshake reads: the record header read so far, its body left */
	uint8_t hdr[TLS_REC_HDR];
	size_t hdr_got, hdr_off, rec_left;
	/* ciphertext made and not yet taken by the socket */
	char *out;
	size_t out_cap, out_head, out_tail;
	struct xp_tls_peer peer;
	char why[320]; /* a failed handshake's reason */
};

/* Why this thread's last client handshake failed ("" if it did not). */
static __thread char tls_last_why[320];

const struct xp_tls_peer *tcp_tls_peer(const struct tcp_tls *t)
{
	return &t->peer;
}

const char *tcp_tls_why(const struct tcp_tls *t)
{
	return t->why[0] ? t->why : "unknown reason";
}

bool tcp_tls_is_server(const struct tcp_tls *t)
{
	return t->creds->server;
}

static int tls_err(char *err, size_t errlen, int ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "what failed: GnuTLS's reason" into err; -EINVAL. */
static int tls_err(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s: %s", msg, gnutls_strerror(ret));
	return -EINVAL;
}

const char *xp_tls_mode_str(enum xp_tls_mode m)
{
	switch (m) {
	case XP_TLS_USER:
		return "user";
	case XP_TLS_KTLS:
		return "ktls";
	case XP_TLS_OFF:
		break;
	}
	return "off";
}

/* ---- credentials ------------------------------------------------------- */

static int tls_psk_server_cb(gnutls_session_t s, const gnutls_datum_t *user,
			     gnutls_datum_t *key)
{
	struct tcp_tls *ct = gnutls_session_get_ptr(s);
	char id[sizeof(ct->peer.name)];

	if (!user || user->size == 0 || user->size >= sizeof(id))
		return -1;
	memcpy(id, user->data, user->size);
	id[user->size] = 0;
	for (unsigned int i = 0; i < user->size; i++)
		if ((unsigned char)id[i] < 0x20 || (unsigned char)id[i] > 0x7e)
			return -1; /* printable only: it reaches logs */
	key->data = gnutls_malloc(XP_TLS_PSK_LEN);
	if (!key->data)
		return -1;
	key->size = XP_TLS_PSK_LEN;
	if (ct->creds->psk_lookup(ct->creds->psk_arg, id, key->data)) {
		gnutls_free(key->data);
		key->data = NULL;
		key->size = 0;
		snprintf(ct->why, sizeof(ct->why), "unknown PSK identity '%s'",
			 id);
		return -1;
	}
	snprintf(ct->peer.name, sizeof(ct->peer.name), "%s", id);
	return 0;
}

/*
 * Server: a client certificate, when one comes, must verify against the
 * CA file; a refusal here ends the handshake with an alert the client
 * reports. None at all is fine (the login authenticates the host).
 */
static int tls_verify_client(gnutls_session_t s)
{
	struct tcp_tls *ct = gnutls_session_get_ptr(s);
	unsigned int n = 0, status = 0;
	gnutls_datum_t txt = {0};

	if (!gnutls_certificate_get_peers(s, &n) || !n)
		return 0;
	if (gnutls_certificate_verify_peers2(s, &status) < 0)
		status = GNUTLS_CERT_INVALID;
	if (!status)
		return 0;
	if (!gnutls_certificate_verification_status_print(
		status, GNUTLS_CRT_X509, &txt, 0)) {
		snprintf(ct->why, sizeof(ct->why),
			 "client certificate refused: %s",
			 (const char *)txt.data);
		gnutls_free(txt.data);
	} else {
		snprintf(ct->why, sizeof(ct->why),
			 "client certificate refused");
	}
	return GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR;
}

static int tls_load_x509(struct xp_tls *t, const struct xp_tls_opts *o,
			 char *err, size_t errlen)
{
	int ret;

	ret = gnutls_certificate_allocate_credentials(&t->x509);
	if (ret < 0)
		return tls_err(err, errlen, ret,
			       "TLS: certificate credentials");
	if (o->ca_file) {
		ret = gnutls_certificate_set_x509_trust_file(
		    t->x509, o->ca_file, GNUTLS_X509_FMT_PEM);
		if (ret <= 0)
			return tls_err(err, errlen,
				       ret ? ret
					   : GNUTLS_E_NO_CERTIFICATE_FOUND,
				       "TLS: CA file %s", o->ca_file);
		t->verify_client = o->server;
		if (o->server)
			gnutls_certificate_set_verify_function(
			    t->x509, tls_verify_client);
	}
	if (o->cert_file || o->key_file) {
		if (!o->cert_file || !o->key_file) {
			snprintf(
			    err, errlen,
			    "TLS: a certificate needs both its file and its key file");
			return -EINVAL;
		}
		ret = gnutls_certificate_set_x509_key_file(
		    t->x509, o->cert_file, o->key_file, GNUTLS_X509_FMT_PEM);
		if (ret < 0)
			return tls_err(err, errlen, ret, "TLS: certificate %s",
				       o->cert_file);
	}
	return 0;
}

int xp_tls_create(const struct xp_tls_opts *o, struct xp_tls **out, char *err,
		  size_t errlen)
{
	struct xp_tls *t;
	const char *epos;
	int ret;

	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "TLS: out of memory");
		return -ENOMEM;
	}
	t->server = o->server;
	t->no_ktls = o->no_ktls;
	ret = gnutls_priority_init(&t->prio, TLS_PRIORITY, &epos);
	if (ret < 0) {
		ret = tls_err(err, errlen, ret, "TLS: priority string at '%s'",
			      epos);
		goto out_destroy;
	}
	if (o->server) {
		if (!o->psk_lookup && !o->cert_file) {
			snprintf(
			    err, errlen,
			    "TLS: the target needs hosts with secrets (PSK) or a certificate");
			ret = -EINVAL;
			goto out_destroy;
		}
		if (o->psk_lookup) {
			ret =
			    gnutls_psk_allocate_server_credentials(&t->psk_srv);
			if (ret < 0) {
				ret = tls_err(err, errlen, ret,
					      "TLS: PSK credentials");
				goto out_destroy;
			}
			gnutls_psk_set_server_credentials_function2(
			    t->psk_srv, tls_psk_server_cb);
			t->psk_lookup = o->psk_lookup;
			t->psk_arg = o->psk_arg;
		}
		if (o->cert_file || o->ca_file) {
			ret = tls_load_x509(t, o, err, errlen);
			if (ret)
				goto out_destroy;
		}
	} else if (o->ca_file) {
		ret = tls_load_x509(t, o, err, errlen);
		if (ret)
			goto out_destroy;
	} else if (o->psk_identity && o->psk) {
		gnutls_datum_t key = {.data = (unsigned char *)o->psk,
				      .size = XP_TLS_PSK_LEN};

		ret = gnutls_psk_allocate_client_credentials(&t->psk_cli);
		if (ret >= 0)
			ret = gnutls_psk_set_client_credentials(
			    t->psk_cli, o->psk_identity, &key,
			    GNUTLS_PSK_KEY_RAW);
		if (ret < 0) {
			ret = tls_err(err, errlen, ret, "TLS: PSK credentials");
			goto out_destroy;
		}
	} else {
		snprintf(
		    err, errlen,
		    "TLS needs a pre-shared key (the host's key file) or a CA file to check the target's certificate");
		ret = -EINVAL;
		goto out_destroy;
	}
	*out = t;
	return 0;

out_destroy:
	xp_tls_destroy(t);
	return ret;
}

void xp_tls_destroy(struct xp_tls *t)
{
	if (!t)
		return;
	if (t->psk_cli)
		gnutls_psk_free_client_credentials(t->psk_cli);
	if (t->psk_srv)
		gnutls_psk_free_server_credentials(t->psk_srv);
	if (t->x509)
		gnutls_certificate_free_credentials(t->x509);
	if (t->prio)
		gnutls_priority_deinit(t->prio);
	free(t);
}

/* ---- transport functions: the socket under GnuTLS ---------------------- */

/* Ciphertext GnuTLS produced: kept until the socket takes it. */
static ssize_t tls_push(gnutls_transport_ptr_t p, const giovec_t *iov,
			int iovcnt)
{
	struct tcp_tls *t = p;
	size_t total = 0;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (t->out_tail + total > t->out_cap) {
		size_t used = t->out_tail - t->out_head;
		size_t cap = MAX(t->out_cap ? t->out_cap : 16384, used + total);
		char *n;

		if (t->out_head) {
			memmove(t->out, t->out + t->out_head, used);
			t->out_head = 0;
			t->out_tail = used;
		}
		if (used + total > t->out_cap) {
			while (cap < used + total)
				cap *= 2;
			n = realloc(t->out, cap);
			if (!n) {
				gnutls_transport_set_errno(t->s, ENOMEM);
				return -1;
			}
			t->out = n;
			t->out_cap = cap;
		}
	}
	for (int i = 0; i < iovcnt; i++) {
		memcpy(t->out + t->out_tail, iov[i].iov_base, iov[i].iov_len);
		t->out_tail += iov[i].iov_len;
	}
	return (ssize_t)total;
}

/*
 * Handshake: whole records only (header, then its body), so that no
 * byte past the handshake's last record is taken from the socket.
 * After it: as much as GnuTLS asks for.
 */
static ssize_t tls_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct tcp_tls *t = p;
	ssize_t n;

	if (t->hs_done) {
		n = recv(t->fd, buf, len, MSG_DONTWAIT);
		if (n < 0)
			gnutls_transport_set_errno(t->s, errno);
		return n;
	}
	if (t->hdr_got < TLS_REC_HDR) {
		n = recv(t->fd, t->hdr + t->hdr_got, TLS_REC_HDR - t->hdr_got,
			 MSG_DONTWAIT);
		if (n <= 0) {
			if (n < 0)
				gnutls_transport_set_errno(t->s, errno);
			return n;
		}
		t->hdr_got += (size_t)n;
		if (t->hdr_got < TLS_REC_HDR) {
			gnutls_transport_set_errno(t->s, EAGAIN);
			return -1;
		}
		t->hdr_off = 0;
		t->rec_left = (size_t)t->hdr[3] << 8 | t->hdr[4];
	}
	if (t->hdr_off < TLS_REC_HDR) {
		size_t k = MIN(len, TLS_REC_HDR - t->hdr_off);

		memcpy(buf, t->hdr + t->hdr_off, k);
		t->hdr_off += k;
		if (t->hdr_off == TLS_REC_HDR && !t->rec_left)
			t->hdr_got = 0;
		return (ssize_t)k;
	}
	n = recv(t->fd, buf, MIN(len, t->rec_left), MSG_DONTWAIT);
	if (n <= 0) {
		if (n < 0)
			gnutls_transport_set_errno(t->s, errno);
		return n;
	}
	t->rec_left -= (size_t)n;
	if (!t->rec_left)
		t->hdr_got = 0; /* the next record's header next */
	return n;
}

/* Send held ciphertext: 0 when none is left, -EAGAIN, or -errno. */
int tcp_tls_out_flush(struct tcp_tls *t)
{
	while (t->out_tail > t->out_head) {
		ssize_t n =
		    send(t->fd, t->out + t->out_head, t->out_tail - t->out_head,
			 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			return -errno;
		}
		t->out_head += (size_t)n;
	}
	t->out_head = t->out_tail = 0;
	if (t->out_cap > 4 * TLS_SEND_MAX) {
		/* a handshake's odd size goes back; regrown on need */
		free(t->out);
		t->out = NULL;
		t->out_cap = 0;
	}
	return 0;
}

/* ---- sessions ---------------------------------------------------------- */

void tcp_tls_free(struct tcp_tls *t)
{
	if (!t)
		return;
	if (t->s)
		gnutls_deinit(t->s);
	free(t->out);
	free(t);
}

/* A session on fd for side creds; host: the name a client checks. */
int tcp_tls_new(struct xp_tls *creds, int fd, const char *host,
		struct tcp_tls **out)
{
	unsigned int flags = GNUTLS_NONBLOCK | GNUTLS_NO_TICKETS |
			     (creds->server ? GNUTLS_SERVER : GNUTLS_CLIENT);
	struct tcp_tls *t;
	int ret;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = fd;
	t->creds = creds;
	ret = gnutls_init(&t->s, flags);
	if (ret < 0)
		goto out_fail;
	gnutls_session_set_ptr(t->s, t);
	gnutls_transport_set_ptr(t->s, t);
	gnutls_transport_set_vec_push_function(t->s, tls_push);
	gnutls_transport_set_pull_function(t->s, tls_pull);
	ret = gnutls_priority_set(t->s, creds->prio);
	if (ret < 0)
		goto out_fail;
	if (creds->psk_srv)
		ret = gnutls_credentials_set(t->s, GNUTLS_CRD_PSK,
					     creds->psk_srv);
	if (ret >= 0 && creds->psk_cli)
		ret = gnutls_credentials_set(t->s, GNUTLS_CRD_PSK,
					     creds->psk_cli);
	if (ret >= 0 && creds->x509)
		ret = gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE,
					     creds->x509);
	if (ret < 0)
		goto out_fail;
	if (creds->server && creds->verify_client) {
		/*
		 * Optional; one that comes is verified in the handshake. No
		 * CA list is sent, so a client sends the certificate it has
		 * (and learns it is refused) rather than none.
		 */
		gnutls_certificate_server_set_request(t->s,
						      GNUTLS_CERT_REQUEST);
		gnutls_certificate_send_x509_rdn_sequence(t->s, 1);
	}
	if (!creds->server && creds->x509) {
		struct in6_addr a6;
		struct in_addr a4;

		/* an address is checked against the IP SANs, a name sent */
		if (host && inet_pton(AF_INET, host, &a4) != 1 &&
		    inet_pton(AF_INET6, host, &a6) != 1)
			gnutls_server_name_set(t->s, GNUTLS_NAME_DNS, host,
					       strlen(host));
		gnutls_session_set_verify_cert(t->s, host, 0);
	}
	*out = t;
	return 0;

out_fail:
	log_err("tls: setting up a session: %s", gnutls_strerror(ret));
	tcp_tls_free(t);
	return -EIO;
}

/*
 * The peer the client certificate names (its CN), once verified. Server
 * side; "" when the client sent none. -EACCES when one came and failed.
 */
static int tls_client_cert(struct tcp_tls *t)
{
	const gnutls_datum_t *chain;
	unsigned int n = 0, status = 0;
	gnutls_x509_crt_t crt;
	size_t len;
	int ret;

	chain = gnutls_certificate_get_peers(t->s, &n);
	if (!chain || !n)
		return 0;
	ret = gnutls_certificate_verify_peers2(t->s, &status);
	if (ret < 0 || status) {
		gnutls_datum_t txt = {0};

		if (ret >= 0 && !gnutls_certificate_verification_status_print(
				    status, GNUTLS_CRT_X509, &txt, 0)) {
			snprintf(t->why, sizeof(t->why),
				 "client certificate refused: %s",
				 (const char *)txt.data);
			gnutls_free(txt.data);
		} else {
			snprintf(t->why, sizeof(t->why),
				 "client certificate refused: %s",
				 gnutls_strerror(ret));
		}
		return -EACCES;
	}
	if (gnutls_x509_crt_init(&crt) < 0)
		return -ENOMEM;
	len = sizeof(t->peer.name);
	ret = gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER);
	if (ret >= 0)
		ret = gnutls_x509_crt_get_dn_by_oid(
		    crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, t->peer.name, &len);
	gnutls_x509_crt_deinit(crt);
	if (ret < 0) {
		t->peer.name[0] = 0;
		snprintf(t->why, sizeof(t->why),
			 "client certificate has no common name");
		return -EACCES;
	}
	str_sanitize(t->peer.name, sizeof(t->peer.name), t->peer.name,
		     strlen(t->peer.name));
	return 0;
}

/*
 * The reason a handshake failed, for the log and the user, and its
 * errno: -EACCES where credentials were refused (an alert, a certificate
 * that does not verify), -ECONNRESET where the peer just went.
 */
static int tls_fail_why(struct tcp_tls *t, int ret)
{
	int err = ret == GNUTLS_E_PREMATURE_TERMINATION ||
			  ret == GNUTLS_E_PULL_ERROR ||
			  ret == GNUTLS_E_PUSH_ERROR
		      ? -ECONNRESET
		      : -EACCES;
	char what[sizeof(t->why)];

	if (t->why[0])
		return err;
	if ((ret == GNUTLS_E_WARNING_ALERT_RECEIVED ||
	     ret == GNUTLS_E_FATAL_ALERT_RECEIVED) &&
	    t->creds->psk_cli)
		snprintf(
		    what, sizeof(what),
		    "the target refused our pre-shared key (is this host's key file the target's [host] secret for it?): alert '%s'",
		    gnutls_alert_get_name(gnutls_alert_get(t->s)));
	else if (ret == GNUTLS_E_WARNING_ALERT_RECEIVED ||
		 ret == GNUTLS_E_FATAL_ALERT_RECEIVED)
		snprintf(what, sizeof(what), "the peer refused it (alert '%s')",
			 gnutls_alert_get_name(gnutls_alert_get(t->s)));
	else if (t->creds->server && t->peer.name[0])
		snprintf(
		    what, sizeof(what),
		    "PSK identity '%s': %s (does the host's key file hold another secret than its [host] entry?)",
		    t->peer.name, gnutls_strerror(ret));
	else if (ret == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
		gnutls_datum_t txt = {0};
		unsigned int status =
		    gnutls_session_get_verify_cert_status(t->s);

		if (!gnutls_certificate_verification_status_print(
			status, GNUTLS_CRT_X509, &txt, 0)) {
			snprintf(what, sizeof(what),
				 "the peer's certificate is not trusted: %s",
				 (const char *)txt.data);
			gnutls_free(txt.data);
		} else {
			snprintf(what, sizeof(what),
				 "the peer's certificate is not trusted");
		}
	} else if (ret == GNUTLS_E_PREMATURE_TERMINATION ||
		   ret == GNUTLS_E_PULL_ERROR || ret == GNUTLS_E_PUSH_ERROR)
		snprintf(
		    what, sizeof(what),
		    "the peer closed the connection (does it speak TLS with these credentials?)");
	else
		snprintf(what, sizeof(what), "%s", gnutls_strerror(ret));
	snprintf(t->why, sizeof(t->why), "%s", what);
	return err;
}

/*
 * One step of the handshake: 1 done, 0 wants the socket (readable, or
 * writable while t->out holds bytes), -errno failed (t->why says why).
 */
int tcp_tls_handshake_step(struct tcp_tls *t)
{
	int ret;

	if (!t->hs_over) {
		ret = tcp_tls_out_flush(t);
		if (ret == -EAGAIN)
			return 0;
		if (ret)
			goto out_send_failed;
		do {
			ret = gnutls_handshake(t->s);
		} while (ret == GNUTLS_E_INTERRUPTED);
		if (ret < 0 && ret != GNUTLS_E_AGAIN) {
			/* tell the peer why (GnuTLS leaves it to us), if it
			 * goes */
			if (ret != GNUTLS_E_FATAL_ALERT_RECEIVED &&
			    ret != GNUTLS_E_WARNING_ALERT_RECEIVED)
				gnutls_alert_send_appropriate(t->s, ret);
			tcp_tls_out_flush(t);
			return tls_fail_why(t, ret);
		}
		t->hs_over = ret == 0;
		ret = tcp_tls_out_flush(t);
		if (ret && ret != -EAGAIN)
			goto out_send_failed;
		if (!t->hs_over)
			return 0;
	}
	/* our last flight must be out before the socket is anyone's */
	ret = tcp_tls_out_flush(t);
	if (ret == -EAGAIN)
		return 0;
	if (ret)
		goto out_send_failed;
	t->hs_done = true;
	t->peer.psk = gnutls_auth_get_type(t->s) == GNUTLS_CRD_PSK;
	if (t->creds->server && !t->peer.psk) {
		ret = tls_client_cert(t);
		if (ret)
			return ret;
	}
	return 1;

out_send_failed:
	snprintf(t->why, sizeof(t->why), "send: %s", strerror(-ret));
	return -ECONNRESET;
}

/* ---- kernel TLS -------------------------------------------------------- */

union tls_keys {
	struct tls_crypto_info info;
	struct tls12_crypto_info_aes_gcm_128 gcm128;
	struct tls12_crypto_info_aes_gcm_256 gcm256;
	struct tls12_crypto_info_chacha20_poly1305 chacha;
};

/* The negotiated keys of one direction as kTLS takes them; its size. */
static int tls_crypto_info(struct tcp_tls *t, bool rx, union tls_keys *ci)
{
	gnutls_cipher_algorithm_t alg = gnutls_cipher_get(t->s);
	gnutls_datum_t iv, key;
	unsigned char seq[8];
	int ret;

	ret = gnutls_record_get_state(t->s, rx ? 1 : 0, NULL, &iv, &key, seq);
	if (ret < 0)
		return -EIO;
	memset(ci, 0, sizeof(*ci));
	ci->info.version = TLS_1_3_VERSION;
	switch (alg) {
	case GNUTLS_CIPHER_AES_128_GCM:
		if (iv.size != 12 || key.size != 16)
			return -EIO;
		ci->info.cipher_type = TLS_CIPHER_AES_GCM_128;
		memcpy(ci->gcm128.salt, iv.data, 4);
		memcpy(ci->gcm128.iv, iv.data + 4, 8);
		memcpy(ci->gcm128.key, key.data, 16);
		memcpy(ci->gcm128.rec_seq, seq, 8);
		return sizeof(ci->gcm128);
	case GNUTLS_CIPHER_AES_256_GCM:
		if (iv.size != 12 || key.size != 32)
			return -EIO;
		ci->info.cipher_type = TLS_CIPHER_AES_GCM_256;
		memcpy(ci->gcm256.salt, iv.data, 4);
		memcpy(ci->gcm256.iv, iv.data + 4, 8);
		memcpy(ci->gcm256.key, key.data, 32);
		memcpy(ci->gcm256.rec_seq, seq, 8);
		return sizeof(ci->gcm256);
	case GNUTLS_CIPHER_CHACHA20_POLY1305:
		if (iv.size != 12 || key.size != 32)
			return -EIO;
		ci->info.cipher_type = TLS_CIPHER_CHACHA20_POLY1305;
		memcpy(ci->chacha.iv, iv.data, 12);
		memcpy(ci->chacha.key, key.data, 32);
		memcpy(ci->chacha.rec_seq, seq, 8);
		return sizeof(ci->chacha);
	default:
		return -EOPNOTSUPP;
	}
}

/*
 * After the handshake: give the record layer to the kernel where it has
 * kTLS. 0: t->peer.mode says which (a kernel without the tls module, or
 * a cipher it lacks, leaves the user-space records); -errno when the
 * socket is left half set up (transmit handed over, receive refused):
 * the connection must go.
 */
int tcp_tls_ktls(struct tcp_tls *t)
{
	union tls_keys tx, rx;
	int txl, rxl;

	t->peer.mode = XP_TLS_USER;
	log_debug(
	    "tls: handshake over: %zu header bytes of a next record read, %zu left of one, %zu pending",
	    t->hdr_got, t->rec_left, gnutls_record_check_pending(t->s));
	/* bytes past the handshake already taken: GnuTLS must read on */
	if (t->creds->no_ktls || gnutls_record_check_pending(t->s) ||
	    t->out_tail > t->out_head || t->hdr_got || t->rec_left)
		return 0;
	txl = tls_crypto_info(t, false, &tx);
	rxl = tls_crypto_info(t, true, &rx);
	if (txl < 0 || rxl < 0)
		goto out_user;
	if (setsockopt(t->fd, SOL_TCP, TCP_ULP, "tls", sizeof("tls")) < 0) {
		log_debug("tls: no kernel TLS (%s): records in user space",
			  strerror(errno));
		goto out_user;
	}
	if (setsockopt(t->fd, SOL_TLS, TLS_TX, &tx, (socklen_t)txl) < 0) {
		log_info(
		    "tls: kernel TLS refused the transmit keys (%s): records in user space",
		    strerror(errno));
		goto out_user; /* TLS_BASE: the socket still sends as is */
	}
	if (setsockopt(t->fd, SOL_TLS, TLS_RX, &rx, (socklen_t)rxl) < 0) {
		int err = errno;

		log_err("tls: kernel TLS refused the receive keys: %s",
			strerror(err));
		memset(&tx, 0, sizeof(tx));
		memset(&rx, 0, sizeof(rx));
		return -err;
	}
	memset(&tx, 0, sizeof(tx));
	memset(&rx, 0, sizeof(rx));
	t->peer.mode = XP_TLS_KTLS;
	return 0;

out_user:
	memset(&tx, 0, sizeof(tx));
	memset(&rx, 0, sizeof(rx));
	return 0;
}

/* ---- the user-space record layer --------------------------------------- */

static ssize_t tls_io_error(struct tcp_tls *t, int ret)
{
	switch (ret) {
	case GNUTLS_E_DECRYPTION_FAILED:
		/* a record failed its integrity check: altered on the way */
		errno = EBADMSG;
		break;
	case GNUTLS_E_PUSH_ERROR:
	case GNUTLS_E_PULL_ERROR:
		errno = ECONNRESET;
		break;
	case GNUTLS_E_MEMORY_ERROR:
		errno = ENOMEM;
		break;
	case GNUTLS_E_FATAL_ALERT_RECEIVED:
	case GNUTLS_E_WARNING_ALERT_RECEIVED:
		/*
		 * In TLS 1.3 a server refuses a client certificate after the
		 * client's handshake is over: its CONNECT gets the alert
		 */
		snprintf(tls_last_why, sizeof(tls_last_why),
			 "the peer refused it (alert '%s')",
			 gnutls_alert_get_name(gnutls_alert_get(t->s)));
		errno = EACCES;
		break;
	default:
		log_debug("tls: record layer: %s", gnutls_strerror(ret));
		errno = EPROTO;
		break;
	}
	t->err = errno;
	return -1;
}

/*
 * readv() through TLS: as readv() on a non-blocking socket (-1 with
 * errno EAGAIN when nothing is there, 0 at the end). Short only when the
 * socket and GnuTLS's buffer are both empty, so a short read still
 * means "drained" to the caller.
 */
ssize_t tcp_tls_readv(struct tcp_tls *t, const struct iovec *iov, int n)
{
	size_t got = 0;

	if (t->err) {
		errno = t->err;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		size_t off = 0;

		while (off < iov[i].iov_len) {
			ssize_t r = gnutls_record_recv(
			    t->s, (char *)iov[i].iov_base + off,
			    iov[i].iov_len - off);

			if (r > 0) {
				off += (size_t)r;
				got += (size_t)r;
				continue;
			}
			if (r == GNUTLS_E_INTERRUPTED)
				continue;
			if (r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION ||
			    r == GNUTLS_E_AGAIN) {
				if (got)
					return (
					    ssize_t)got; /* the rest later */
				if (r != GNUTLS_E_AGAIN)
					return 0;
				errno = EAGAIN;
				return -1;
			}
			/* an error: kept for the next call if bytes came first
			 */
			tls_io_error(t, (int)r);
			if (got)
				return (ssize_t)got;
			return -1;
		}
	}
	return (ssize_t)got;
}

/* One record of len (<= TLS_REC_MAX) bytes into t->out: 0, or -1 errno. */
static int tls_send_record(struct tcp_tls *t, const char *p, size_t len)
{
	while (len) {
		ssize_t r = gnutls_record_send(t->s, p, len);

		if (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN)
			continue; /* our push never blocks: not seen */
		if (r < 0) {
			tls_io_error(t, (int)r);
			return -1;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/*
 * sendmsg() through TLS: takes up to TLS_SEND_MAX bytes of iov when no
 * ciphertext of an earlier call is left unsent (else -1, EAGAIN: the
 * "socket" is full), encrypts them as records of up to 16 KiB (small
 * pieces, a chain's frame headers, gathered into one) and sends what
 * the socket takes. The bytes taken are the caller's no more, as with a
 * socket.
 */
ssize_t tcp_tls_sendv(struct tcp_tls *t, const struct iovec *iov, int n)
{
	char stage[TLS_REC_MAX]; /* small pieces gathered into one record */
	size_t total = 0, staged = 0;
	int ret;

	if (t->err) {
		errno = t->err;
		return -1;
	}
	ret = tcp_tls_out_flush(t);
	if (ret) {
		errno = -ret;
		return -1;
	}
	for (int i = 0; i < n && total < TLS_SEND_MAX; i++) {
		const char *p = iov[i].iov_base;
		size_t len = MIN(iov[i].iov_len, TLS_SEND_MAX - total);

		total += len;
		while (len) {
			size_t k;

			if (!staged && len >= TLS_REC_MAX) {
				/* a whole record straight from the caller */
				if (tls_send_record(t, p, TLS_REC_MAX))
					return -1;
				p += TLS_REC_MAX;
				len -= TLS_REC_MAX;
				continue;
			}
			k = MIN(len, TLS_REC_MAX - staged);
			memcpy(stage + staged, p, k);
			staged += k;
			p += k;
			len -= k;
			if (staged == TLS_REC_MAX) {
				if (tls_send_record(t, stage, staged))
					return -1;
				staged = 0;
			}
		}
	}
	if (staged && tls_send_record(t, stage, staged))
		return -1;
	ret = tcp_tls_out_flush(t);
	if (ret && ret != -EAGAIN) {
		errno = -ret;
		return -1;
	}
	return (ssize_t)total;
}

bool tcp_tls_out_pending(const struct tcp_tls *t)
{
	return t->out_tail > t->out_head;
}

/* Bytes GnuTLS decrypted and holds: no fd shows them. */
bool tcp_tls_rx_pending(struct tcp_tls *t)
{
	return gnutls_record_check_pending(t->s) > 0;
}

/* ---- blocking helpers for the client's handshake ----------------------- */

/* Wait until the socket is readable (or writable: out) or deadline. */
static int tls_wait(struct tcp_tls *t, uint64_t deadline)
{
	struct pollfd pfd = {
	    .fd = t->fd,
	    .events = tcp_tls_out_pending(t) ? POLLOUT : POLLIN,
	};
	uint64_t now = now_ms();
	int r, ms = -1;

	if (deadline != UINT64_MAX) {
		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (int)MIN(deadline - now, (uint64_t)INT32_MAX);
	}
	r = poll(&pfd, 1, ms);
	if (r < 0 && errno != EINTR)
		return -errno;
	return r == 0 ? -ETIMEDOUT : 0;
}

const char *xp_tls_last_error(void)
{
	return tls_last_why;
}

/* A client's whole handshake; -EACCES, -ECONNRESET, -ETIMEDOUT. */
int tcp_tls_handshake(struct tcp_tls *t, uint64_t deadline)
{
	tls_last_why[0] = 0;
	for (;;) {
		int ret = tcp_tls_handshake_step(t);

		if (ret == 1)
			return 0;
		if (ret == 0)
			ret = tls_wait(t, deadline);
		if (ret == -ETIMEDOUT && !t->why[0])
			snprintf(t->why, sizeof(t->why),
				 "no answer to the handshake in time");
		if (ret) {
			snprintf(tls_last_why, sizeof(tls_last_why), "%s",
				 tcp_tls_why(t));
			return ret;
		}
	}
}

/* Move exactly len bytes through user-space TLS before deadline. */
int tcp_tls_io_timed(struct tcp_tls *t, void *buf, size_t len, bool wr,
		     uint64_t deadline)
{
	char *p = buf;

	while (len) {
		struct iovec iov = {.iov_base = p, .iov_len = len};
		ssize_t n =
		    wr ? tcp_tls_sendv(t, &iov, 1) : tcp_tls_readv(t, &iov, 1);
		int ret;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN)
			return -errno;
		ret = tls_wait(t, deadline);
		if (ret)
			return ret;
	}
	while (wr && tcp_tls_out_pending(t)) {
		int ret = tcp_tls_out_flush(t);

		if (ret != -EAGAIN)
			return ret;
		ret = tls_wait(t, deadline);
		if (ret)
			return ret;
	}
	return 0;
}
