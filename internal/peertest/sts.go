package peertest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// STSAccount is the account of every identity the STS emulator reports.
const STSAccount = "123456789012"

// STSCall is one request the STS emulator answered.
type STSCall struct {
	Action          string // AssumeRole, GetCallerIdentity, …
	AccessKeyID     string // the caller's key ("" when unsigned)
	RoleARN         string // AssumeRole: the role asked for
	RoleSessionName string // AssumeRole: the session name asked for
	Status          int    // the HTTP status answered
}

// STS is test support: an emulator of AWS STS on 127.0.0.1 speaking the
// query protocol (form-encoded POST, XML answers) that the SDKs use; point
// AWS_ENDPOINT_URL_STS at its URL. Every request's signature is checked
// with VerifySigV4Scope("sts", "", creds). AssumeRole issues fresh
// temporary credentials on each call and adds them to creds (so a verifier
// over the same map accepts them); GetCallerIdentity answers the calling
// key's identity (see Identity). Its methods are safe for concurrent use;
// the server is closed by t.Cleanup.
type STS struct {
	URL string // http://127.0.0.1:port

	creds  map[string]Credentials
	verify func(*http.Request, []byte) error
	srv    *httptest.Server

	mu      sync.Mutex
	calls   []STSCall            // guarded by mu
	assumed map[string][3]string // guarded by mu: issued key → account, user id, ARN
	issued  int                  // guarded by mu
}

// NewSTS starts an STS emulator that accepts the keys in creds (and the
// ones it issues, which it adds to creds).
func NewSTS(t testing.TB, creds map[string]Credentials) *STS {
	t.Helper()
	s := &STS{creds: creds, verify: VerifySigV4Scope("sts", "", creds), assumed: map[string][3]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Calls returns every request so far, in arrival order.
func (s *STS) Calls() []STSCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]STSCall(nil), s.calls...)
}

// Count returns how many requests for action succeeded.
func (s *STS) Count(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Action == action && c.Status == http.StatusOK {
			n++
		}
	}
	return n
}

// Identity returns what GetCallerIdentity answers for an access key id: for
// a key this emulator issued, the assumed role's session
// (AROA…:session, arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION); for any
// other, the IAM user named by the key (AIDA+key,
// arn:aws:iam::ACCOUNT:user/KEY).
func (s *STS) Identity(keyID string) (account, userID, arn string) {
	s.mu.Lock()
	id, ok := s.assumed[keyID]
	s.mu.Unlock()
	if ok {
		return id[0], id[1], id[2]
	}
	return IAMUserIdentity(keyID)
}

// IAMUserIdentity is the identity the STS emulator gives a key it did not
// issue: the IAM user named by the key.
func IAMUserIdentity(keyID string) (account, userID, arn string) {
	return STSAccount, "AIDA" + keyID, "arn:aws:iam::" + STSAccount + ":user/" + keyID
}

const stsNS = "https://sts.amazonaws.com/doc/2011-06-15/"

func (s *STS) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	call := STSCall{}
	fail := func(status int, code, msg string) {
		call.Status = status
		s.record(call)
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<ErrorResponse xmlns="%s"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
			stsNS, code, xmlText(msg), newID())
	}
	if err != nil {
		fail(http.StatusBadRequest, "InvalidInput", "unreadable body")
		return
	}
	form, err := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || err != nil {
		fail(http.StatusBadRequest, "InvalidAction", "want a form-encoded POST")
		return
	}
	call.Action, call.RoleARN, call.RoleSessionName = form.Get("Action"), form.Get("RoleArn"), form.Get("RoleSessionName")
	if c, _, ok := strings.Cut(strings.TrimPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="), "/"); ok {
		call.AccessKeyID = c
	}
	if err := s.verify(r, body); err != nil {
		fail(http.StatusForbidden, "SignatureDoesNotMatch", err.Error())
		return
	}
	if form.Get("Version") != "2011-06-15" {
		fail(http.StatusBadRequest, "InvalidParameterValue", "Version must be 2011-06-15")
		return
	}
	switch call.Action {
	case "GetCallerIdentity":
		account, userID, arn := s.Identity(call.AccessKeyID)
		call.Status = http.StatusOK
		s.record(call)
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<GetCallerIdentityResponse xmlns="%s"><GetCallerIdentityResult><Arn>%s</Arn><UserId>%s</UserId><Account>%s</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></GetCallerIdentityResponse>`,
			stsNS, xmlText(arn), xmlText(userID), account, newID())
	case "AssumeRole":
		role, ok := strings.CutPrefix(call.RoleARN, "arn:aws:iam::")
		_, roleName, _ := strings.Cut(role, ":role/")
		if !ok || roleName == "" || call.RoleSessionName == "" {
			fail(http.StatusBadRequest, "ValidationError", "RoleArn must be arn:aws:iam::ACCOUNT:role/NAME and RoleSessionName set")
			return
		}
		dur := time.Hour
		if d := form.Get("DurationSeconds"); d != "" {
			n, err := strconv.Atoi(d)
			if err != nil || n < 900 {
				fail(http.StatusBadRequest, "ValidationError", "DurationSeconds must be at least 900")
				return
			}
			dur = time.Duration(n) * time.Second
		}
		s.mu.Lock()
		s.issued++
		keyID := fmt.Sprintf("ASIATEST%012d", s.issued)
		s.mu.Unlock()
		c := Credentials{Secret: newID() + newID(), SessionToken: "FwoGZXIvYXdzE" + newID() + newID()}
		roleID := fmt.Sprintf("AROATEST%012d", len(roleName))
		arn := "arn:aws:sts::" + STSAccount + ":assumed-role/" + roleName + "/" + call.RoleSessionName
		credsMu.Lock()
		s.creds[keyID] = c
		credsMu.Unlock()
		s.mu.Lock()
		s.assumed[keyID] = [3]string{STSAccount, roleID + ":" + call.RoleSessionName, arn}
		s.mu.Unlock()
		call.Status = http.StatusOK
		s.record(call)
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleResponse xmlns="%s"><AssumeRoleResult><AssumedRoleUser><Arn>%s</Arn><AssumedRoleId>%s</AssumedRoleId></AssumedRoleUser><Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration></Credentials></AssumeRoleResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></AssumeRoleResponse>`,
			stsNS, xmlText(arn), xmlText(roleID+":"+call.RoleSessionName), keyID, c.Secret, c.SessionToken,
			time.Now().Add(dur).UTC().Format(time.RFC3339), newID())
	default:
		fail(http.StatusBadRequest, "InvalidAction", "the emulator does not implement "+call.Action)
	}
}

func (s *STS) record(c STSCall) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
