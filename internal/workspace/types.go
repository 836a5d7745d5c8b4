package workspace

import "github.com/sandhold/sandhold/internal/dispatch"

// Arguments and results of the file tools, in the field names, defaults
// and shapes of AIO Sandbox 1.9.4 (tags file and file-watch). Pointer
// fields are AIO's nullable ones; nil takes AIO's default. The embedded
// dispatch.On names the sandbox for MCP and /v1/tools/call; the HTTP
// routes set it from the URL (empty: the caller's default sandbox).

// ReadArgs is FileReadRequest.
type ReadArgs struct {
	dispatch.On
	File      string `json:"file" required:"true"`
	StartLine *int   `json:"start_line,omitempty"`
	EndLine   *int   `json:"end_line,omitempty"`
	Sudo      *bool  `json:"sudo,omitempty"`
}

// ReadResult is FileReadResult.
type ReadResult struct {
	Content string `json:"content"`
	File    string `json:"file"`
}

// WriteArgs is FileWriteRequest.
type WriteArgs struct {
	dispatch.On
	File            string  `json:"file" required:"true"`
	Content         string  `json:"content" required:"true"`
	Encoding        *string `json:"encoding,omitempty"`
	Append          *bool   `json:"append,omitempty"`
	LeadingNewline  *bool   `json:"leading_newline,omitempty"`
	TrailingNewline *bool   `json:"trailing_newline,omitempty"`
	Sudo            *bool   `json:"sudo,omitempty"`
}

// WriteResult is FileWriteResult.
type WriteResult struct {
	File         string `json:"file"`
	BytesWritten *int   `json:"bytes_written"`
}

// ReplaceArgs is FileReplaceRequest.
type ReplaceArgs struct {
	dispatch.On
	File   string `json:"file" required:"true"`
	OldStr string `json:"old_str" required:"true"`
	NewStr string `json:"new_str" required:"true"`
	Sudo   *bool  `json:"sudo,omitempty"`
}

// ReplaceResult is FileReplaceResult.
type ReplaceResult struct {
	File          string `json:"file"`
	ReplacedCount int    `json:"replaced_count"`
}

// SearchArgs is FileSearchRequest.
type SearchArgs struct {
	dispatch.On
	File  string `json:"file" required:"true"`
	Regex string `json:"regex" required:"true"`
	Sudo  *bool  `json:"sudo,omitempty"`
}

// SearchResult is FileSearchResult.
type SearchResult struct {
	File        string   `json:"file"`
	Matches     []string `json:"matches"`
	LineNumbers []int    `json:"line_numbers"`
}

// FindArgs is FileFindRequest.
type FindArgs struct {
	dispatch.On
	Path string `json:"path" required:"true"`
	Glob string `json:"glob" required:"true"`
}

// FindResult is FileFindResult (plus truncated, as every multi-file
// result here has).
type FindResult struct {
	Path      string   `json:"path"`
	Files     []string `json:"files"`
	Truncated bool     `json:"truncated"`
}

// GrepArgs is FileGrepRequest.
type GrepArgs struct {
	dispatch.On
	Path            string   `json:"path" required:"true"`
	Pattern         string   `json:"pattern" required:"true"`
	Include         []string `json:"include,omitempty"`
	Exclude         []string `json:"exclude,omitempty"`
	CaseInsensitive *bool    `json:"case_insensitive,omitempty"`
	FixedStrings    *bool    `json:"fixed_strings,omitempty"`
	ContextBefore   *int     `json:"context_before,omitempty"`
	ContextAfter    *int     `json:"context_after,omitempty"`
	MaxResults      *int     `json:"max_results,omitempty"`
	MaxFileSize     *string  `json:"max_file_size,omitempty"`
	Multiline       *bool    `json:"multiline,omitempty"`
	Offset          *int     `json:"offset,omitempty"`
	Type            *string  `json:"type,omitempty"`
	Recursive       *bool    `json:"recursive,omitempty"`
}

// GrepMatch is AIO's GrepMatch.
type GrepMatch struct {
	File          string   `json:"file"`
	LineNumber    int      `json:"line_number"`
	LineContent   string   `json:"line_content"`
	ContextBefore []string `json:"context_before"`
	ContextAfter  []string `json:"context_after"`
}

// GrepResult is FileGrepResult.
type GrepResult struct {
	Path          string      `json:"path"`
	Pattern       string      `json:"pattern"`
	Matches       []GrepMatch `json:"matches"`
	MatchCount    int         `json:"match_count"`
	FilesSearched *int        `json:"files_searched"`
	FilesMatched  *int        `json:"files_matched"`
	Truncated     bool        `json:"truncated"`
}

// GlobArgs is FileGlobRequest.
type GlobArgs struct {
	dispatch.On
	Path            string   `json:"path" required:"true"`
	Pattern         string   `json:"pattern" required:"true"`
	Exclude         []string `json:"exclude,omitempty"`
	IncludeHidden   *bool    `json:"include_hidden,omitempty"`
	FilesOnly       *bool    `json:"files_only,omitempty"`
	IncludeMetadata *bool    `json:"include_metadata,omitempty"`
	MaxResults      *int     `json:"max_results,omitempty"`
	SortBy          *string  `json:"sort_by,omitempty"`
	SortDesc        *bool    `json:"sort_desc,omitempty"`
}

// GlobFileInfo is AIO's GlobFileInfo.
type GlobFileInfo struct {
	Path         string  `json:"path"`
	Name         string  `json:"name"`
	IsDirectory  bool    `json:"is_directory"`
	Size         *int64  `json:"size"`
	ModifiedTime *string `json:"modified_time"`
}

// GlobResult is FileGlobResult.
type GlobResult struct {
	Path       string         `json:"path"`
	Pattern    string         `json:"pattern"`
	Files      []GlobFileInfo `json:"files"`
	TotalCount int            `json:"total_count"`
	Truncated  bool           `json:"truncated"`
}

// ListArgs is FileListRequest.
type ListArgs struct {
	dispatch.On
	Path               string   `json:"path" required:"true"`
	Recursive          *bool    `json:"recursive,omitempty"`
	ShowHidden         *bool    `json:"show_hidden,omitempty"`
	FileTypes          []string `json:"file_types,omitempty"`
	MaxDepth           *int     `json:"max_depth,omitempty"`
	IncludeSize        *bool    `json:"include_size,omitempty"`
	IncludePermissions *bool    `json:"include_permissions,omitempty"`
	SortBy             *string  `json:"sort_by,omitempty"`
	SortDesc           *bool    `json:"sort_desc,omitempty"`
}

// FileInfo is AIO's FileInfo.
type FileInfo struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	IsDirectory  bool    `json:"is_directory"`
	Size         *int64  `json:"size"`
	ModifiedTime *string `json:"modified_time"`
	Permissions  *string `json:"permissions"`
	Extension    *string `json:"extension"`
}

// ListResult is FileListResult (plus truncated).
type ListResult struct {
	Path           string     `json:"path"`
	Files          []FileInfo `json:"files"`
	TotalCount     int        `json:"total_count"`
	DirectoryCount int        `json:"directory_count"`
	FileCount      int        `json:"file_count"`
	Truncated      bool       `json:"truncated"`
}

// EditorArgs is StrReplaceEditorRequest. The PDF, Excel and PPTX view
// options (page_range, sheet_name, row_range, slide_range) are accepted
// and ignored: sandhold views text files only.
type EditorArgs struct {
	dispatch.On
	Command        string  `json:"command" required:"true"`
	Path           string  `json:"path" required:"true"`
	FileText       *string `json:"file_text,omitempty"`
	OldStr         *string `json:"old_str,omitempty"`
	NewStr         *string `json:"new_str,omitempty"`
	InsertLine     *int    `json:"insert_line,omitempty"`
	ViewRange      []int   `json:"view_range,omitempty"`
	ReplaceMode    *string `json:"replace_mode,omitempty"`
	PageRange      []int   `json:"page_range,omitempty"`
	SheetName      *string `json:"sheet_name,omitempty"`
	RowRange       []int   `json:"row_range,omitempty"`
	SlideRange     []int   `json:"slide_range,omitempty"`
	EnableMetadata *bool   `json:"enable_metadata,omitempty"`
}

// EditorResult is StrReplaceEditorResult.
type EditorResult struct {
	Output     string         `json:"output"`
	Error      *string        `json:"error"`
	Path       string         `json:"path"`
	PrevExist  bool           `json:"prev_exist"`
	OldContent *string        `json:"old_content"`
	NewContent *string        `json:"new_content"`
	Metadata   map[string]any `json:"metadata"`
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func strOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}
